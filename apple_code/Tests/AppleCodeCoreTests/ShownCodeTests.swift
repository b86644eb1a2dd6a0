import AppleCodeCore
import Foundation
import Testing

/// An answer that shows its fix instead of making it: the candidate edits (`ShownCode`) and the files they may
/// belong to (`NamedFiles`, `FileMentions`).
@Suite struct ShownCodeTests {
    static let calc = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"

    @Test func aShownFunctionReplacesTheOneItNames() {
        let answer = "The bug is in add. Here is the fix:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
        let edits = ShownCode.edits(answer: answer, files: [("test_calc.py", "from calc import add\n"),
                                                            ("calc.py", Self.calc)])
        #expect(edits == [ShownCode.Edit(path: "calc.py", oldText: "def add(a, b):\n    return a - b",
                                         newText: "def add(a, b):\n    return a + b")])
    }

    /// A whole file shown (a docstring, then its functions): each changed function is a candidate, the unchanged
    /// ones are not.
    @Test func aWholeFileShownGivesItsChangedFunctions() {
        let file = "\"\"\"Counts.\"\"\"\n\n\ndef counts(text):\n    return {}\n\n\ndef top(text):\n    return min(text)\n"
        let answer = "Here:\n```python\n\"\"\"Counts.\"\"\"\n\ndef counts(text):\n    return {}\n\ndef top(text):\n"
            + "    return max(text)\n```"
        #expect(ShownCode.edits(answer: answer, files: [("tally.py", file)])
            == [ShownCode.Edit(path: "tally.py", oldText: "def top(text):\n    return min(text)",
                               newText: "def top(text):\n    return max(text)")])
    }

    @Test func aCommentAboveTheShownDefinitionIsPassedOver() {
        let answer = "Here is the corrected code:\n```python\n# calc.py\ndef add(a, b):\n    return a + b\n```"
        #expect(ShownCode.edits(answer: answer, files: [("calc.py", Self.calc)]).map(\.newText)
            == ["def add(a, b):\n    return a + b"])
    }

    @Test func aMethodShownWithoutItsIndentationIsIndentedAsTheFileHasIt() {
        let file = "class Pages:\n    def count(self, total, size):\n        return total // size\n\n    def other(self):\n        pass\n"
        let answer = "```\ndef count(self, total, size):\n    return -(-total // size)\n\nprint(Pages().count(10, 3))\n```"
        let edits = ShownCode.edits(answer: answer, files: [("pages.py", file)])
        #expect(edits == [ShownCode.Edit(path: "pages.py",
                                         oldText: "    def count(self, total, size):\n        return total // size",
                                         newText: "    def count(self, total, size):\n        return -(-total // size)")])
    }

    @Test func aBracedFunctionIsReplacedToItsClosingBrace() {
        let file = "function add(a, b) {\n  return a - b;\n}\n\nfunction mul(a, b) {\n  return a * b;\n}\n"
        let answer = "```js\nfunction add(a, b) {\n  return a + b;\n}\n```"
        let edits = ShownCode.edits(answer: answer, files: [("calc.js", file)])
        #expect(edits.map(\.oldText) == ["function add(a, b) {\n  return a - b;\n}"])
        #expect(edits.map(\.newText) == ["function add(a, b) {\n  return a + b;\n}"])
    }

    @Test(arguments: [
        "The fix is to return a + b.",  // no code
        "```python\ndef add(a, b):\n    return a - b\n```",  // the same code
        "```python\nreturn a + b\n```",  // not a definition
        "```python\ndef subtract(a, b):\n    return a - b\n```",  // defined nowhere
    ])
    func nothingToTry(answer: String) {
        #expect(ShownCode.edits(answer: answer, files: [("calc.py", Self.calc)]).isEmpty)
    }

    @Test func aDefinitionFoundInTwoFilesIsLeftAlone() {
        let answer = "```python\ndef add(a, b):\n    return a + b\n```"
        #expect(ShownCode.edits(answer: answer, files: [("calc.py", Self.calc), ("old.py", Self.calc)]).isEmpty)
    }

    @Test func namesInTextAreFileLikeWords() {
        #expect(FileMentions.names(in: "The tests in test_calc.py fail. Fix `calc.py` (see src/app.js). Fix main.py.")
            == ["test_calc.py", "calc.py", "src/app.js", "main.py"])
        #expect(FileMentions.names(in: "Read a.py, then a.py again.") == ["a.py"])
    }

    /// A definition found in a file goes into an editFile call the events show: a link out of the workspace, a
    /// hidden (dot) folder or a folder are never read for one.
    @Test func onlyRegularFilesInsideTheWorkspaceAreRead() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("shown-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let workspace = base.appendingPathComponent("ws")
        try FileManager.default.createDirectory(at: workspace.appendingPathComponent(".secret"),
                                                withIntermediateDirectories: true)
        try "def key(): return 'outside'\n".write(to: base.appendingPathComponent("outside.py"), atomically: true,
                                                   encoding: .utf8)
        try FileManager.default.createSymbolicLink(at: workspace.appendingPathComponent("link.py"),
                                                   withDestinationURL: base.appendingPathComponent("outside.py"))
        try "def key(): return 'hidden'\n".write(to: workspace.appendingPathComponent(".secret/k.py"),
                                                  atomically: true, encoding: .utf8)
        try Self.calc.write(to: workspace.appendingPathComponent("calc.py"), atomically: true, encoding: .utf8)
        let found = ShownCode.files(["link.py", ".secret/k.py", "../outside.py", ".secret", "calc.py", "calc.py"],
                                    workspace: workspace.path)
        #expect(found.map(\.path) == ["calc.py"])
    }
}
