import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

/// Applies a unified diff made by TextDiff to `before`: what `patch` would do, enough to check a diff is true.
func applyUnified(_ diff: String, to before: String) -> String? {
    let old = TextDiff.lines(of: before).map(String.init)
    var result: [String] = []
    var next = 0  // index of the next old line not yet copied
    var lines = diff.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    if lines.last == "" { lines.removeLast() }
    var index = 2  // after the --- and +++ lines
    while index < lines.count {
        let header = lines[index]
        guard header.hasPrefix("@@ -") else { return nil }
        let oldRange = header.dropFirst(4).prefix { $0 != " " }
        let parts = oldRange.split(separator: ",").compactMap { Int($0) }
        guard let first = parts.first else { return nil }
        let count = parts.count > 1 ? parts[1] : 1
        let start = count == 0 ? first : first - 1
        guard start >= next, start <= old.count else { return nil }
        result += old[next..<start]
        next = start
        index += 1
        while index < lines.count, !lines[index].hasPrefix("@@") {
            let line = lines[index]
            let noNewline = index + 1 < lines.count && lines[index + 1] == "\\ No newline at end of file"
            let text = String(line.dropFirst()) + (noNewline ? "" : "\n")
            switch line.first {
            case " ":
                guard next < old.count, old[next] == text else { return nil }
                result.append(text); next += 1
            case "-":
                guard next < old.count, old[next] == text else { return nil }
                next += 1
            case "+":
                result.append(text)
            default:
                return nil
            }
            index += noNewline ? 2 : 1
        }
    }
    result += old[next...]
    return result.joined()
}

/// Lines a shortest edit script removes and adds: n + m - 2 * LCS (dynamic programming, for small inputs).
func minimalChanges(_ a: [Substring], _ b: [Substring]) -> Int {
    var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
    for i in stride(from: a.count - 1, through: 0, by: -1) {
        for j in stride(from: b.count - 1, through: 0, by: -1) {
            table[i][j] = Array(a[i].utf8) == Array(b[j].utf8) ? table[i + 1][j + 1] + 1
                : max(table[i + 1][j], table[i][j + 1])
        }
    }
    return a.count + b.count - 2 * table[0][0]
}

/// A deterministic generator, so a failing case can be replayed.
struct SeededLines {
    var state: UInt64
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
    mutating func text(lines: Int, alphabet: Int) -> String {
        (0..<lines).map { _ in "line \(next(alphabet))\n" }.joined()
    }
}

@Suite struct TextDiffTests {
    @Test func anEditIsOneHunkWithThreeLinesOfContext() throws {
        let before = (1...10).map { "line \($0)\n" }.joined()
        let after = before.replacingOccurrences(of: "line 5\n", with: "line five\n")
        let diff = try #require(TextDiff.unified(path: "src/a.txt", before: before, after: after))
        #expect(diff == """
            --- a/src/a.txt
            +++ b/src/a.txt
            @@ -2,7 +2,7 @@
             line 2
             line 3
             line 4
            -line 5
            +line five
             line 6
             line 7
             line 8

            """)
    }

    @Test func aNewFileIsAddedFromDevNull() throws {
        let diff = try #require(TextDiff.unified(path: "new.py", before: nil, after: "a\nb\n"))
        #expect(diff == "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a\n+b\n")
        let emptied = try #require(TextDiff.unified(path: "x", before: "a\n", after: ""))
        #expect(emptied == "--- a/x\n+++ b/x\n@@ -1 +0,0 @@\n-a\n")
    }

    @Test func aMissingLastNewlineIsShown() throws {
        let diff = try #require(TextDiff.unified(path: "x", before: "a\nb", after: "a\nb\n"))
        #expect(diff == "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
        #expect(applyUnified(diff, to: "a\nb") == "a\nb\n")
    }

    @Test func crlfLinesAreLinesAndComparedAsBytes() throws {
        let diff = try #require(TextDiff.unified(path: "w.txt", before: "one\r\ntwo\r\n", after: "one\r\nTWO\r\n"))
        #expect(diff.contains("\n-two\r\n+TWO\r\n"))
        #expect(TextDiff.unified(path: "x", before: "same\n", after: "same\n") == nil)
        // Canonically equivalent to String's ==, different bytes on disk: a change.
        #expect(TextDiff.unified(path: "x", before: "caf\u{E9}\n", after: "cafe\u{301}\n") != nil)
    }

    @Test func distantChangesAreSeparateHunksAndNearOnesShareContext() throws {
        let before = (1...30).map { "\($0)\n" }.joined()
        var lines = (1...30).map { "\($0)\n" }
        lines[2] = "three\n"
        lines[25] = "twenty-six\n"
        let diff = try #require(TextDiff.unified(path: "x", before: before, after: lines.joined()))
        #expect(diff.components(separatedBy: "\n@@ -").count == 3)  // two hunks
        #expect(diff.contains("@@ -1,6 +1,6 @@") && diff.contains("@@ -23,7 +23,7 @@"))
        lines[25] = "26\n"
        lines[8] = "nine\n"
        let near = try #require(TextDiff.unified(path: "x", before: before, after: lines.joined()))
        #expect(near.contains("@@ -1,12 +1,12 @@") && near.components(separatedBy: "\n@@ -").count == 2)
    }

    /// Random pairs: every diff applies back to the new text, and (small inputs) changes no more lines than a
    /// shortest edit script needs.
    @Test func diffsAreTrueAndMinimal() throws {
        var random = SeededLines(state: 42)
        for _ in 0..<300 {
            let before = random.text(lines: random.next(25), alphabet: 6)
            let after = random.text(lines: random.next(25), alphabet: 6)
            guard let diff = TextDiff.unified(path: "f", before: before, after: after) else {
                #expect(before == after)
                continue
            }
            #expect(applyUnified(diff, to: before) == after, "diff of \(before.debugDescription) to \(after.debugDescription)")
            let changed = diff.split(separator: "\n").dropFirst(2).filter { $0.hasPrefix("-") || $0.hasPrefix("+") }
            #expect(changed.count == minimalChanges(TextDiff.lines(of: before), TextDiff.lines(of: after)))
        }
    }

    @Test func manyChangesStillGiveATrueDiff() throws {
        var random = SeededLines(state: 7)
        let before = random.text(lines: 900, alphabet: 1000)
        let after = random.text(lines: 900, alphabet: 1000)
        let edits = TextDiff.edits(TextDiff.lines(of: before), TextDiff.lines(of: after))
        let changed = edits.filter { if case .same = $0 { false } else { true } }.count
        #expect(changed > TextDiff.maxEdits)  // past the search's limit: the middle is one hunk
        let unbounded = TextDiff.hunks(edits, old: TextDiff.lines(of: before), new: TextDiff.lines(of: after))
        #expect(applyUnified((["--- a/f", "+++ b/f"] + unbounded).joined(separator: "\n") + "\n", to: before) == after)
    }

    @Test func aLongDiffIsCutAtALineEndAndSaysSo() throws {
        let after = (1...2000).map { "new line \($0)\n" }.joined()
        let diff = try #require(TextDiff.unified(path: "big.txt", before: nil, after: after))
        #expect(diff.utf8.count <= TextDiff.maxDiffBytes)
        #expect(diff.hasSuffix(" more lines]\n"))
        #expect(diff.contains("\n+new line 100\n"))
        let huge = String(repeating: "x\n", count: TextDiff.maxInputBytes / 2 + 1)
        #expect(TextDiff.unified(path: "h", before: "x\n", after: huge) == nil)
    }
}

@Suite struct ToolResultDetailTests {
    @Test func writeAndEditReportTheirDiff() async throws {
        let ws = try TempWorkspace()
        let created = await ws.call(WriteFileTool(), ["path": "a.txt", "content": "one\ntwo\n"])
        #expect(created.diff == "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n")
        let replaced = await ws.call(WriteFileTool(), ["path": "a.txt", "content": "one\n2\n"])
        #expect(replaced.diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")
        let unchanged = await ws.call(WriteFileTool(), ["path": "a.txt", "content": "one\n2\n"])
        #expect(unchanged.diff == nil)
        let edited = await ws.call(EditFileTool(), ["path": "a.txt", "oldText": "one", "newText": "1"])
        #expect(edited.diff == "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-one\n+1\n 2\n")
        let failed = await ws.call(EditFileTool(), ["path": "a.txt", "oldText": "absent", "newText": "x"])
        #expect(failed.diff == nil)
    }

    @Test func replacingABinaryFileHasNoDiff() async throws {
        let ws = try TempWorkspace()
        try Data([0x00, 0xFF, 0x10]).write(to: URL(fileURLWithPath: ws.path + "/blob.bin"))
        let result = await ws.call(WriteFileTool(), ["path": "blob.bin", "content": "text now\n"])
        #expect(result.ok)
        #expect(result.diff == nil)
        #expect(ws.read("blob.bin") == "text now\n")
    }

    @Test func commandsReportTheirExitCodeOnlyWhenTheyExited() async throws {
        let ws = try TempWorkspace()
        let tool = RunCommandTool(sandbox: .none(reason: "test"))
        let failed = await ws.call(tool, ["command": "echo out; exit 3"])
        #expect(failed.exitCode == 3)
        #expect(failed.eventDetail.output == "exit code 3\nout\n")
        let fine = await ws.call(tool, ["command": "true"])
        #expect(fine.exitCode == 0)
        let killed = await ws.call(tool, ["command": "kill -9 $$"])
        #expect(killed.exitCode == nil)
    }

    @Test func theOutputInTheEventIsBounded() {
        let long = String(repeating: "a", count: 10_000) + "END"
        let shown = ToolResultDetail.bounded(long)
        #expect(shown.utf8.count <= ToolResultDetail.maxOutputBytes)
        #expect(shown.hasPrefix("aaaa") && shown.hasSuffix("aEND"))
        #expect(shown.contains("bytes not shown ...]"))
        #expect(ToolResultDetail.bounded("short") == "short")
    }
}
