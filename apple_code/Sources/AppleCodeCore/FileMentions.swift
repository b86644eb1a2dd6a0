/// The file names a text mentions: words that look like a file (`calc.py`, `src/app.js`), in order, each once.
/// The task's names are the files shown with it (`TaskFiles`); an answer's are where the code it shows may belong.
public enum FileMentions {
    public static func names(in text: String) -> [String] {
        var seen: Set<String> = []
        return text.split(whereSeparator: { " \n\t`'\"(),:;*".contains($0) }).map {
            var word = Substring($0)
            // A sentence's end is not part of the name.
            while word.last == "." || word.last == "!" || word.last == "?" { word = word.dropLast() }
            return String(word)
        }.filter { $0.contains(".") && !$0.hasPrefix(".") && $0.count <= 200 && seen.insert($0).inserted }
    }
}
