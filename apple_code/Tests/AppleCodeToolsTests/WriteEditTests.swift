import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

@Suite struct WriteFileTests {
    @Test func createsParentsAndReportsBytesAndChangedFile() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(WriteFileTool(), ["path": "src/deep/new.py", "content": "print('hé')\n"])
        #expect(result.ok)
        #expect(result.text == "Created src/deep/new.py (13 bytes written)")
        #expect(result.filesChanged == ["src/deep/new.py"])
        #expect(ws.read("src/deep/new.py") == "print('hé')\n")
        let again = await ws.call(WriteFileTool(), ["path": "./src/deep/new.py", "content": ""])
        #expect(again.text == "Replaced src/deep/new.py (0 bytes written)")
        #expect(ws.read("src/deep/new.py") == "")
    }

    /// A write of what the file already holds changes nothing, and says so (a small model's "fix" that copied
    /// the file it read): it must not read as a change made.
    @Test func rewritingTheSameContentSaysNothingChanged() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.py", "x = 1\n")
        let same = await ws.call(WriteFileTool(), ["path": "a.py", "content": "x = 1\n"])
        #expect(!same.ok)
        #expect(same.text.contains("a.py already holds exactly this content; nothing changed"))
        #expect(same.filesChanged.isEmpty)
        let changed = await ws.call(WriteFileTool(), ["path": "a.py", "content": "x = 2\n"])
        #expect(changed.ok && changed.filesChanged == ["a.py"])
        #expect(ws.read("a.py") == "x = 2\n")
    }

    @Test func absolutePathInsideIsReportedRelative() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(WriteFileTool(), ["path": .string(ws.path + "/a.txt"), "content": "x"])
        #expect(result.filesChanged == ["a.txt"])
    }

    @Test func folderOrFileInTheWayIsAClearError() async throws {
        let ws = try TempWorkspace()
        try ws.write("dir/x", "x")
        try ws.write("file.txt", "f")
        let onFolder = await ws.call(WriteFileTool(), ["path": "dir", "content": "x"])
        #expect(onFolder.text == "Error: writeFile: dir is a folder, not a file (use listDirectory)")
        let underFile = await ws.call(WriteFileTool(), ["path": "file.txt/child", "content": "x"])
        #expect(underFile.text.hasPrefix("Error: writeFile: file.txt/child: a parent is not a folder"))
        #expect(ws.read("file.txt") == "f")
        let missingContent = await ws.call(WriteFileTool(), ["path": "a.txt"])
        #expect(missingContent.text == "Error: writeFile: missing required argument 'content'")
        #expect(!ws.exists(ws.path + "/a.txt"))
    }

    @Test func symlinkInsideTheWorkspaceIsWrittenThrough() async throws {
        let ws = try TempWorkspace()
        try ws.write("real.txt", "old")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/alias.txt", withDestinationPath: "real.txt")
        let result = await ws.call(WriteFileTool(), ["path": "alias.txt", "content": "new"])
        #expect(result.filesChanged == ["real.txt"])
        #expect(ws.read("real.txt") == "new")
    }

    /// A hard link in the workspace to a file outside it (made here to the test's own `outside` folder) is the
    /// same file: writing or editing it in place would change the outside one. Refused, nothing changed.
    @Test func aHardLinkToAFileOutsideIsNotWrittenOrEdited() async throws {
        let ws = try TempWorkspace()
        #expect(link(ws.outside + "/secret.txt", ws.path + "/linked.txt") == 0)
        let write = await ws.call(WriteFileTool(), ["path": "linked.txt", "content": "overwritten"])
        #expect(write.text.hasPrefix("Error: writeFile: linked.txt has 2 hard links"), "\(write.text)")
        #expect(write.filesChanged.isEmpty)
        let edit = await ws.call(EditFileTool(), ["path": "linked.txt", "oldText": "secret", "newText": "changed"])
        #expect(edit.text.hasPrefix("Error: editFile: linked.txt has 2 hard links"), "\(edit.text)")
        #expect(try String(contentsOfFile: ws.outside + "/secret.txt", encoding: .utf8) == "secret\n")
        // Reading it stays possible (pnpm's node_modules are hard links into its store).
        #expect(await ws.call(ReadFileTool(), ["path": "linked.txt"]).ok)
        // A file whose other name is gone is an ordinary file again: replaced, shorter content and all.
        #expect(unlink(ws.outside + "/secret.txt") == 0)
        let after = await ws.call(WriteFileTool(), ["path": "linked.txt", "content": "x"])
        #expect(after.ok, "\(after.text)")
        #expect(ws.read("linked.txt") == "x")
    }
}

@Suite struct EditFileTests {
    /// The binary sniff reads only the start of a file; bytes that are not UTF-8 further on must not be
    /// rewritten as U+FFFD by an edit elsewhere in the file.
    @Test func invalidUTF8PastTheSniffedStartIsRefusedAndLeftAlone() async throws {
        let ws = try TempWorkspace()
        let original = Data(String(repeating: "a", count: 9000).utf8) + Data([0x0A, 0x68, 0xFF, 0x0A]) + Data("end\n".utf8)
        try original.write(to: URL(fileURLWithPath: ws.path + "/mixed.txt"))
        let result = await ws.call(EditFileTool(), ["path": "mixed.txt", "oldText": "end", "newText": "END"])
        #expect(result.text.hasPrefix("Error: editFile: mixed.txt is not valid UTF-8"))
        #expect(result.filesChanged.isEmpty)
        #expect(FileManager.default.contents(atPath: ws.path + "/mixed.txt") == original)
    }

    static let source = """
        def greet(name):
            print("Hello, " + name)

        def main():
            greet("world")
        """

    @Test func replacesTheOneExactMatch() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), [
            "path": "app.py", "oldText": "    print(\"Hello, \" + name)", "newText": "    print(f\"Hi, {name}\")",
        ])
        #expect(result.ok)
        #expect(result.text == "Edited app.py: replaced 1 occurrence at line 2")
        #expect(result.filesChanged == ["app.py"])
        #expect(ws.read("app.py") == Self.source.replacingOccurrences(of: "print(\"Hello, \" + name)",
                                                                       with: "print(f\"Hi, {name}\")"))
    }

    @Test func anEditThatChangesNothingIsRefused() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), [
            "path": "app.py", "oldText": "def main():", "newText": "def main():",
        ])
        #expect(!result.ok)
        #expect(result.text.contains("newText is the same as oldText, so nothing would change"))
        #expect(result.filesChanged.isEmpty)
        #expect(ws.read("app.py") == Self.source)
    }

    @Test func noMatchChangesNothingAndSuggestsTheNearestLines() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), [
            "path": "app.py", "oldText": "print('Hello, ' + name)", "newText": "x",
        ])
        #expect(!result.ok)
        #expect(result.text.hasPrefix("Error: editFile: oldText not found in app.py; nothing changed."))
        #expect(result.text.contains("Did you mean these lines?\n2\t    print(\"Hello, \" + name)"))
        #expect(result.filesChanged.isEmpty)
        #expect(ws.read("app.py") == Self.source)
    }

    @Test func indentationOnlyMissSaysSo() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), [
            "path": "app.py", "oldText": "def main():\n  greet(\"world\")", "newText": "x",
        ])
        #expect(result.text.contains("(whitespace differs)"))
        #expect(result.text.hasSuffix("4\tdef main():\n5\t    greet(\"world\")"))
    }

    @Test func nothingSimilarSaysSo() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), ["path": "app.py", "oldText": "zzzz qqqq", "newText": "x"])
        #expect(result.text.hasSuffix("No similar lines found; read the file first."))
    }

    @Test func severalMatchesChangeNothingAndNameTheLines() async throws {
        let ws = try TempWorkspace()
        try ws.write("app.py", Self.source)
        let result = await ws.call(EditFileTool(), ["path": "app.py", "oldText": "greet(", "newText": "hello("])
        #expect(result.text == "Error: editFile: oldText occurs 2 times in app.py (lines 1, 5); nothing changed. "
            + "Include more surrounding lines to make it unique.")
        #expect(ws.read("app.py") == Self.source)
    }

    @Test func crlfFileMatchesPlainNewlines() async throws {
        let ws = try TempWorkspace()
        try ws.write("win.txt", "one\r\ntwo\r\nthree\r\n")
        let result = await ws.call(EditFileTool(), ["path": "win.txt", "oldText": "two\nthree", "newText": "2\n3"])
        #expect(result.ok)
        #expect(ws.read("win.txt") == "one\r\n2\r\n3\r\n")
    }

    @Test func emptyOldTextAndMissingFileAreErrors() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "a")
        let empty = await ws.call(EditFileTool(), ["path": "a.txt", "oldText": "", "newText": "b"])
        #expect(empty.text == "Error: editFile: oldText is empty; use writeFile to create a file")
        let missing = await ws.call(EditFileTool(), ["path": "b.txt", "oldText": "a", "newText": "b"])
        #expect(missing.text == "Error: editFile: b.txt does not exist. The workspace holds: a.txt.")
        #expect(ws.read("a.txt") == "a")
    }

    @Test func matchingIsExactByteForByte() {
        // "é" precomposed vs "e" + combining accent: equal as Swift Strings, different bytes.
        let text = "caf\u{E9} and cafe\u{301}"
        #expect(EditFileTool.occurrences(of: "cafe\u{301}", in: text).count == 1)
        #expect(EditFileTool.occurrences(of: "aa", in: "aaaa").count == 2)
        #expect(EditFileTool.occurrences(of: "x", in: "").isEmpty)
    }
}

/// What a model copied from readFile's result (its line numbers, the chat template's tags) is taken off a write or
/// an edit; text that only looks like it is written as given.
@Suite struct ReadFileEchoTests {
    static let tally = "def most_common(text):\n    counts = word_counts(text)\n    return min(counts, key=counts.get)\n"

    /// Seen: the 1.5B rewrote tally.py as readFile had shown it, numbered and tagged; the check could not import it.
    @Test func aWholeFileCopiedFromReadFileIsWrittenWithoutItsNumbersAndTags() async throws {
        let ws = try TempWorkspace()
        try ws.write("tally.py", Self.tally)
        let content = "<tool_response>1\tdef most_common(text):\n2\t    counts = word_counts(text)\n"
            + "3\t    return max(counts, key=counts.get)\n</tool_response>"
        let result = await ws.call(WriteFileTool(), ["path": "tally.py", "content": .string(content)])
        #expect(result.ok, "\(result.text)")
        #expect(ws.read("tally.py") == Self.tally.replacing("min(", with: "max("))
        #expect(result.text.contains("line numbers and tags readFile shows were left out"))
        let copied = await ws.call(WriteFileTool(), ["path": "tally.py", "content": .string(
            "<tool_response>" + (ws.read("tally.py") ?? "").split(separator: "\n").enumerated().map { "\($0 + 1)\t\($1)" }
                .joined(separator: "\n") + "</tool_response>")])
        #expect(!copied.ok && copied.text.contains("already holds exactly this content"))  // its final newline aside
        let numbered = "1\tx = 1\n2\ty = 2\n"  // numbers alone, over a file that has none
        _ = await ws.call(WriteFileTool(), ["path": "tally.py", "content": .string(numbered)])
        #expect(ws.read("tally.py") == "x = 1\ny = 2\n")
    }

    @Test func numberedRowsOfANewFileOrOfDataThatHasThemAreWrittenAsGiven() async throws {
        let ws = try TempWorkspace()
        let rows = "1\tAna\n2\tBob\n"
        _ = await ws.call(WriteFileTool(), ["path": "people.tsv", "content": .string(rows)])
        #expect(ws.read("people.tsv") == rows)  // a new file: nothing to say it is an echo
        let more = rows + "3\tCy\n"
        let replaced = await ws.call(WriteFileTool(), ["path": "people.tsv", "content": .string(more)])
        #expect(ws.read("people.tsv") == more && !replaced.text.contains("left out"))  // its own rows are numbered
        let gapped = "1\ta\n3\tb\n"
        try ws.write("x.txt", "old\n")
        _ = await ws.call(WriteFileTool(), ["path": "x.txt", "content": .string(gapped)])
        #expect(ws.read("x.txt") == gapped)  // numbers that do not run on are not readFile's
    }

    @Test func anEditWhoseOldTextCarriesReadFilesNumbersStillApplies() async throws {
        let ws = try TempWorkspace()
        try ws.write("tally.py", Self.tally)
        _ = await ws.call(ReadFileTool(), ["path": "tally.py"])
        // As seen: the first line copied after its number, the next ones with theirs.
        let edit = await ws.call(EditFileTool(), [
            "path": "tally.py",
            "oldText": "counts = word_counts(text)\n3\t    return min(counts, key=counts.get)",
            "newText": "counts = word_counts(text)\n3\t    return max(counts, key=counts.get)",
        ])
        #expect(edit.ok, "\(edit.text)")
        #expect(ws.read("tally.py") == Self.tally.replacing("min(", with: "max("))
        #expect(edit.text.contains("line numbers readFile shows were left out"))
    }

    @Test func anEditThatMatchesAsGivenIsNotTouchedAndAMissStillFails() async throws {
        let ws = try TempWorkspace()
        try ws.write("data.tsv", "1\ta\n2\tb\n")
        let asGiven = await ws.call(EditFileTool(), ["path": "data.tsv", "oldText": "1\ta\n2\tb", "newText": "1\tA\n2\tB"])
        #expect(asGiven.ok && ws.read("data.tsv") == "1\tA\n2\tB\n" && !asGiven.text.contains("left out"))
        let miss = await ws.call(EditFileTool(), ["path": "data.tsv", "oldText": "7\tzz\n8\tyy", "newText": "x"])
        #expect(!miss.ok && miss.text.contains("oldText not found"))
        #expect(ws.read("data.tsv") == "1\tA\n2\tB\n")
    }

    @Test func theRulesThemselves() {
        #expect(ReadFileEcho.withoutLineNumbers("1\ta\n2\tb\n") == "a\nb\n")
        #expect(ReadFileEcho.withoutLineNumbers("  9\ta\n 10\tb") == "a\nb")  // right-aligned numbers
        #expect(ReadFileEcho.withoutLineNumbers("1\ta") == nil)  // one line: too likely data
        #expect(ReadFileEcho.withoutLineNumbers("a\n2\tb", firstMayLack: false) == nil)
        #expect(ReadFileEcho.withoutLineNumbers("a\n2\tb\n3\tc", firstMayLack: true) == "a\nb\nc")
        #expect(ReadFileEcho.withoutLineNumbers("1\ta\n\n3\tc") == nil)  // a line without a number
        #expect(ReadFileEcho.unwrapped("<tool_response>\nx\n</tool_response>") == "x\n")
        #expect(ReadFileEcho.unwrapped("x <tool_response>") == nil)
    }
}
