import Foundation

/// A final answer that shows the fix instead of making it ("Here is the corrected function: ```def add(a, b):
/// return a + b```"): small models do this more often than they call editFile. With `--verify` a backend may try
/// such code in place of the definition it names and keep it only when the check then passes (`ShownCodeTrial`);
/// this type only finds the candidate edits. A candidate is a definition (`def`, `class`, `func`, `function`, `fn`)
/// in a fenced block, at the block's outermost level of definitions, named exactly once among the files given and
/// different there: it replaces that definition (its indented body, or its braces), indented as the file's was.
public enum ShownCode {
    public struct Edit: Sendable, Equatable {
        public let path: String
        public let oldText: String
        public let newText: String

        public init(path: String, oldText: String, newText: String) {
            self.path = path
            self.oldText = oldText
            self.newText = newText
        }
    }

    /// At most this many candidates are tried in one run: each costs a run of the check.
    public static let maxEdits = 3

    public static func edits(answer: String, files: [(path: String, text: String)]) -> [Edit] {
        var found: [Edit] = []
        for block in blocks(in: answer) {
            let lines = block.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for start in definitionStarts(lines) where found.count < maxEdits {
                if let edit = edit(shown: lines, at: start, files: files), !found.contains(edit) { found.append(edit) }
            }
        }
        return found
    }

    /// The definition starting at `lines[start]` in place of the one it names, when that is found exactly once
    /// among `files` and differs; else nil.
    private static func edit(shown lines: [String], at start: Int, files: [(path: String, text: String)]) -> Edit? {
        guard let key = definitionKey(lines[start]) else { return nil }
        let shown = Array(lines[start..<extent(of: start, in: lines)])
        let matches = files.compactMap { file -> (String, [String], Int)? in
            let fileLines = file.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let hits = fileLines.indices.filter { fileLines[$0].dropFirst(leading(fileLines[$0])).hasPrefix(key) }
            return hits.count == 1 ? (file.path, fileLines, hits[0]) : nil
        }
        guard matches.count == 1, let (path, fileLines, at) = matches.first else { return nil }
        let old = Array(fileLines[at..<extent(of: at, in: fileLines)])
        let indent = String(fileLines[at].prefix(leading(fileLines[at])))
        let shownIndent = leading(shown[0])
        let new = shown.map { line in
            line.allSatisfy(\.isWhitespace) ? "" : indent + String(line.dropFirst(min(shownIndent, leading(line))))
        }
        guard new != old else { return nil }
        return Edit(path: path, oldText: old.joined(separator: "\n"), newText: new.joined(separator: "\n"))
    }

    /// Where the block's definitions start: the lines that define something at the shallowest indentation any
    /// definition in it has (a whole file shown: each of its functions; a class: the class, not its methods).
    static func definitionStarts(_ lines: [String]) -> [Int] {
        let defining = lines.indices.filter { definitionKey(lines[$0]) != nil }
        guard let base = defining.map({ leading(lines[$0]) }).min() else { return [] }
        return defining.filter { leading(lines[$0]) == base }
    }

    /// The insides of the answer's fenced code blocks, in order.
    static func blocks(in answer: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in answer.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.drop(while: { $0 == " " }).hasPrefix("```") {
                if let inside = current {
                    blocks.append(inside.joined(separator: "\n"))
                    current = nil
                } else {
                    current = []
                }
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// What a line defining something starts with, up to its name's end (`def add(`, `class Point:`), or nil.
    static func definitionKey(_ line: String) -> String? {
        let text = line.dropFirst(leading(line))
        let keywords = ["async def ", "def ", "class ", "func ", "function ", "fn ", "public func ", "static func "]
        guard let keyword = keywords.first(where: { text.hasPrefix($0) }) else { return nil }
        let rest = text.dropFirst(keyword.count)
        guard let end = rest.firstIndex(where: { "(:<{ ".contains($0) }), end > rest.startIndex else { return nil }
        return keyword + String(rest[...end])
    }

    /// Where the definition starting at `start` ends (exclusive): its braces when the line opens one, else the
    /// lines indented deeper than it (blank lines inside kept, trailing ones left out).
    static func extent(of start: Int, in lines: [String]) -> Int {
        if lines[start].contains("{") {
            var depth = 0
            for index in start..<lines.count {
                for character in lines[index] {
                    if character == "{" { depth += 1 } else if character == "}" { depth -= 1 }
                }
                if depth <= 0 { return index + 1 }
            }
            return lines.count
        }
        let base = leading(lines[start])
        var end = start + 1
        var index = start + 1
        while index < lines.count {
            let line = lines[index]
            if line.allSatisfy(\.isWhitespace) {
                index += 1
                continue
            }
            guard leading(line) > base else { break }
            index += 1
            end = index
        }
        return end
    }

    /// The first 20 of `names` that are regular text files inside `workspace` (`NamedFiles`), with their text: a
    /// definition found here goes into an editFile call's arguments, which the events show, so a file the tools
    /// would not read must not be read here either (editFile itself confines the write).
    public static func files(_ names: [String], workspace: String) -> [(path: String, text: String)] {
        NamedFiles.inWorkspace(names, workspace: workspace, limit: 20).compactMap { file in
            (try? String(contentsOfFile: file.real, encoding: .utf8)).map { (file.path, $0) }
        }
    }

    /// How many spaces and tabs `line` starts with.
    private static func leading(_ line: String) -> Int { line.prefix { $0 == " " || $0 == "\t" }.count }
}
