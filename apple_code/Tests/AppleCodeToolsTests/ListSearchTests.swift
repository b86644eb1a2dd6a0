import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

@Suite struct ListDirectoryTests {
    @Test func listsEntriesWithKindsAndSkipsToolFolders() async throws {
        let ws = try TempWorkspace()
        try ws.write("src/app.py", "x")
        try ws.write("README.md", "r")
        try ws.write(".git/HEAD", "ref")
        try ws.write("node_modules/pkg/index.js", "m")
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/out", withDestinationPath: ws.outside)
        let result = await ws.call(ListDirectoryTool(), [:])
        #expect(result.text == """
            README.md
            out -> \(ws.outside) (symlink, not followed)
            src/
            [3 entries in .; skipped .git, node_modules]
            """)
        let recursive = await ws.call(ListDirectoryTool(), ["path": ".", "recursive": true])
        #expect(recursive.text.hasPrefix("README.md\nout -> "))
        #expect(recursive.text.contains("\nsrc/\nsrc/app.py\n[4 entries in ."))
        #expect(!recursive.text.contains("secret"))
        let sub = await ws.call(ListDirectoryTool(), ["path": "src"])
        #expect(sub.text == "src/app.py\n[1 entry in src]")
    }

    @Test func capsAtTwoHundredAndSaysHowManyWereLeftOut() async throws {
        let ws = try TempWorkspace()
        for index in 0..<250 { try ws.write(String(format: "f%03d.txt", index), "") }
        let result = await ws.call(ListDirectoryTool(), [:], tokens: 5000)
        #expect(result.truncated)
        #expect(result.text.hasSuffix("[250 entries in .; 200 shown, 50 left out]"))
        #expect(result.text.contains("f199.txt\n["))
        let tight = await ws.call(ListDirectoryTool(), [:], tokens: 120)
        #expect(tight.text.contains("entries in .;"))
        #expect(tight.text.contains("left out]"))
        #expect(TokenEstimator.estimate(tight.text) <= 120)
    }

    @Test func fileOrMissingPathIsAClearError() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "")
        let onFile = await ws.call(ListDirectoryTool(), ["path": "a.txt"])
        #expect(onFile.text == "Error: listDirectory: a.txt is a file, not a folder (use readFile)")
        let missing = await ws.call(ListDirectoryTool(), ["path": "nope"])
        #expect(missing.text == "Error: listDirectory: nope does not exist. The workspace holds: a.txt.")
        let badFlag = await ws.call(ListDirectoryTool(), ["recursive": "maybe"])
        #expect(badFlag.text == "Error: listDirectory: argument 'recursive' must be a boolean")
    }
}

@Suite struct SearchFilesTests {
    @Test func globMatchesNamesAndPaths() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.py", "")
        try ws.write("src/b.py", "")
        try ws.write("src/lib/c.py", "")
        try ws.write("src/notes.md", "")
        try ws.write(".venv/lib/d.py", "")
        let byName = await ws.call(SearchFilesTool(), ["pattern": "*.py"])
        #expect(byName.text == "a.py\nsrc/b.py\nsrc/lib/c.py\n[3 paths match *.py in .]")
        let byPath = await ws.call(SearchFilesTool(), ["pattern": "src/**/*.py"])
        #expect(byPath.text == "src/b.py\nsrc/lib/c.py\n[2 paths match src/**/*.py in .]")
        let below = await ws.call(SearchFilesTool(), ["pattern": "*.md", "path": "src"])
        #expect(below.text == "src/notes.md\n[1 path matches *.md in src]")
        let none = await ws.call(SearchFilesTool(), ["pattern": "*.rs"])
        #expect(none.text == "[0 paths match *.rs in .]")
    }

    @Test func braceAlternativesMatch() async throws {
        let ws = try TempWorkspace()
        for name in ["a.js", "b.ts", "c.py", "src/d.ts"] { try ws.write(name, "") }
        let result = await ws.call(SearchFilesTool(), ["pattern": "*.{js,ts}"])
        #expect(result.text == "a.js\nb.ts\nsrc/d.ts\n[3 paths match *.{js,ts} in .]")
        #expect(Glob.expandBraces("{a,b}/*.{c,d}") == ["a/*.c", "a/*.d", "b/*.c", "b/*.d"])
        #expect(Glob.expandBraces("x{y}z") == ["x{y}z"])
        #expect(Glob.expandBraces("{a,{b,c}}") == ["{a,{b,c}}"])
        #expect(Glob.expandBraces(String(repeating: "{a,b}", count: 200)).count == 64)  // no 2^200 blow-up
    }

    @Test func doesNotFollowSymlinksOut() async throws {
        let ws = try TempWorkspace()
        try FileManager.default.createSymbolicLink(atPath: ws.path + "/out", withDestinationPath: ws.outside)
        let result = await ws.call(SearchFilesTool(), ["pattern": "secret*"])
        #expect(result.text == "[0 paths match secret* in .]")
    }

    @Test func capsAtTwoHundred() async throws {
        let ws = try TempWorkspace()
        for index in 0..<230 { try ws.write("d/f\(index).txt", "") }
        let result = await ws.call(SearchFilesTool(), ["pattern": "*.txt"], tokens: 5000)
        #expect(result.text.hasSuffix("[230 paths match *.txt in .; 200 shown, 30 left out]"))
        #expect(result.truncated)
    }
}

@Suite struct SearchContentTests {
    /// ICU backtracks exponentially on (a+)+b against a line of a's: the search gives up at its time limit (or the
    /// run's deadline) with a clear error instead of holding the run until --timeout.
    @Test(.timeLimit(.minutes(1))) func aPatternThatBacktracksWithoutEndGivesUp() async throws {
        let ws = try TempWorkspace()
        try ws.write("evil.txt", String(repeating: "a", count: 40) + "!\n")
        let tool = SearchContentTool(maxSearchTime: .milliseconds(300))
        let slow = await ws.call(tool, ["pattern": "(a+)+b"])
        #expect(slow.text.hasPrefix("Error: searchContent: the pattern took over 0.3 s to search"))
        let late = await SearchContentTool().call(raw: ["pattern": "(a+)+b"],
                                                  context: ws.context(deadline: .now + .milliseconds(300)))
        #expect(late.text == "Error: searchContent: the search was stopped: the run is out of time")
        let fine = await ws.call(tool, ["pattern": "a+!"])
        #expect(fine.text.hasSuffix("[1 match in .]"))
    }

    @Test func findsRegexMatchesAsFileLineText() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.py", "import os\ndef main():\n    os.exit(1)\n")
        try ws.write("src/b.py", "def helper():\n  pass\n")
        try ws.write("src/c.txt", "def not_python\n")
        try ws.write(".git/config", "def hidden\n")
        let result = await ws.call(SearchContentTool(), ["pattern": "^def \\w+\\(", "filePattern": "*.py"])
        #expect(result.text == "a.py:2:def main():\nsrc/b.py:1:def helper():\n[2 matches in .]")
        let all = await ws.call(SearchContentTool(), ["pattern": "def"])
        #expect(all.text.hasSuffix("[3 matches in .]"))
        let oneFile = await ws.call(SearchContentTool(), ["pattern": "exit", "path": "a.py"])
        #expect(oneFile.text == "a.py:3:os.exit(1)\n[1 match in a.py]")
    }

    @Test func invalidRegexIsSearchedAsTextAndLowerCaseIgnoresCase() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.js", "call(foo\nCALL(bar\n")
        let result = await ws.call(SearchContentTool(), ["pattern": "call("])
        #expect(result.text == "a.js:1:call(foo\na.js:2:CALL(bar\n[2 matches in .; searched as plain text (not a valid regex)]")
        let exact = await ws.call(SearchContentTool(), ["pattern": "CALL"])
        #expect(exact.text == "a.js:2:CALL(bar\n[1 match in .]")
    }

    @Test func capsAtOneHundredAndSaysHowManyWereLeftOut() async throws {
        let ws = try TempWorkspace()
        try ws.write("many.txt", String(repeating: "needle\n", count: 130))
        let result = await ws.call(SearchContentTool(), ["pattern": "needle"], tokens: 5000)
        #expect(result.text.hasSuffix("[130 matches in .; 100 shown, 30 left out]"))
        #expect(result.text.contains("many.txt:100:needle\n["))
        let tight = await ws.call(SearchContentTool(), ["pattern": "needle"], tokens: 100)
        #expect(tight.text.hasSuffix("left out]"))
        #expect(TokenEstimator.estimate(tight.text) <= 100)
    }

    @Test func emptyPatternIsAnError() async throws {
        let ws = try TempWorkspace()
        let result = await ws.call(SearchContentTool(), ["pattern": ""])
        #expect(result.text == "Error: searchContent: the pattern is empty")
    }
}

@Suite struct ResultBudgetTests {
    @Test func everyResultIsCutToTheBudgetAndSaysSo() {
        let failedCommand = ToolResult(text: "exit code 1\n" + String(repeating: "log line\n", count: 500) + "FAILED: x",
                                       ok: false, summary: "s").fitted(toTokens: 200)
        #expect(failedCommand.text.hasPrefix("exit code 1\n"))
        #expect(failedCommand.text.hasSuffix("FAILED: x"))  // the tail of a failing command is kept
        let long = ToolResult(text: String(repeating: "word ", count: 2000), summary: "s")
        let cut = long.fitted(toTokens: 200)
        #expect(cut.truncated)
        #expect(TokenEstimator.estimate(cut.text) <= 200)
        #expect(cut.text.contains("cut to fit the context budget"))
        let failure = ToolResult.failure("Error: " + String(repeating: "x", count: 3000)).fitted(toTokens: 10)
        #expect(failure.text.hasPrefix("Error:"))
        #expect(!failure.ok)
        #expect(TokenEstimator.estimate(failure.text) <= 10)
        let short = ToolResult(text: "ok", summary: "s")
        #expect(short.fitted(toTokens: 200) == short)
    }
}
