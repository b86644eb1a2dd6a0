/// Text a model copied from readFile's result into writeFile or editFile: readFile shows each line as
/// `N<tab>text`, and some chat templates wrap a tool result in `<tool_response>` tags. Small models paste those
/// back as the file's content (seen: a whole file rewritten with every line numbered and the tag on top, which
/// the check then could not even import). What was shown is taken off again, only where it is certainly an echo.
public enum ReadFileEcho {
    static let wrapperOpen = "<tool_response>"
    static let wrapperClose = "</tool_response>"

    /// `text` without the tool-result tags around it; nil when it has none.
    public static func unwrapped(_ text: String) -> String? {
        let trimmed = text.drop { $0 == " " || $0 == "\n" }
        guard trimmed.hasPrefix(wrapperOpen) else { return nil }
        var inner = Substring(trimmed.dropFirst(wrapperOpen.count))
        if inner.first == "\n" { inner = inner.dropFirst() }
        if let close = inner.range(of: wrapperClose, options: .backwards) {
            inner = inner[..<close.lowerBound]
        }
        return String(inner)
    }

    /// `text` without readFile's line numbers, when its lines carry consecutive ones (`7\t...`, `8\t...`). With
    /// `firstMayLack` the first line may have none (an editFile oldText started after the number: used only when
    /// the text as given is not in the file, so one numbered line is enough); otherwise a single numbered line
    /// does not count (too likely to be data). Text with no numbered line never does.
    public static func withoutLineNumbers(_ text: String, firstMayLack: Bool = false) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let endsWithNewline = lines.last == ""
        if endsWithNewline { lines.removeLast() }
        var stripped: [Substring] = []
        var expected: Int?
        var numberedLines = 0
        for (index, line) in lines.enumerated() {
            guard let (number, rest) = numbered(line) else {
                if index == 0 && firstMayLack {
                    stripped.append(line)
                    continue
                }
                return nil
            }
            if let want = expected, number != want { return nil }
            expected = number + 1
            numberedLines += 1
            stripped.append(rest)
        }
        guard numberedLines >= (firstMayLack ? 1 : 2) else { return nil }
        return stripped.joined(separator: "\n") + (endsWithNewline ? "\n" : "")
    }

    /// `N<tab>rest` -> (N, rest), as readFile writes a line (its number may be right-aligned with spaces).
    private static func numbered(_ line: Substring) -> (Int, Substring)? {
        let afterSpaces = line.drop { $0 == " " }
        let digits = afterSpaces.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 7, let number = Int(digits) else { return nil }
        let rest = afterSpaces.dropFirst(digits.count)
        guard rest.first == "\t" else { return nil }
        return (number, rest.dropFirst())
    }

    /// writeFile's content as the model meant it: without the tags, and then without the line numbers; nil when
    /// it is not an echo. Line numbers alone count only when they run from line 1 on every line and replace a file
    /// whose own text has none (a whole file copied from readFile): a new file, or data whose rows start with a
    /// number and a tab, is written as given.
    public static func fileContent(_ content: String, replacing previous: String?) -> String? {
        if let inner = unwrapped(content) {
            return withoutLineNumbers(inner) ?? inner
        }
        guard let previous, numbered(previous.prefix { $0 != "\n" }) == nil,
              let first = numbered(content.prefix { $0 != "\n" }), first.0 == 1 else { return nil }
        return withoutLineNumbers(content)
    }
}
