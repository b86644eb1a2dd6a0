import AppleCodeCore
import Foundation
import Testing
@testable import AppleCodeTools

@Suite struct ReadFileTests {
    static func numbered(_ count: Int) -> String {
        (1...count).map { "line \($0)" }.joined(separator: "\n") + "\n"
    }

    @Test func smallFileIsShownWholeWithNumbers() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "alpha\nbeta\ngamma")
        let result = await ws.call(ReadFileTool(), ["path": "a.txt"])
        #expect(result.ok)
        #expect(result.text == "1\talpha\n2\tbeta\n3\tgamma\n[a.txt lines 1-3 of 3; end of file]")
        #expect(result.summary == "a.txt lines 1-3 of 3")
        #expect(!result.truncated)
    }

    @Test func aRangeInAFileThatFitsOneWindowIsWidenedToTheWholeFile() async throws {
        let ws = try TempWorkspace()
        try ws.write("calc.py", Self.numbered(14))
        let part = await ws.call(ReadFileTool(), ["path": "calc.py", "startLine": 1, "endLine": 10])
        #expect(part.text.contains("14\tline 14\n"))
        #expect(part.summary == "calc.py lines 1-14 of 14")
        let later = await ws.call(ReadFileTool(), ["path": "calc.py", "startLine": 12, "endLine": 12])
        #expect(later.text.hasPrefix("1\tline 1\n"))
        // A file longer than one window keeps the range asked for.
        try ws.write("big.txt", Self.numbered(101))
        let window = await ws.call(ReadFileTool(), ["path": "big.txt", "startLine": 5, "endLine": 6])
        #expect(window.text == "5\tline 5\n6\tline 6\n[big.txt lines 5-6 of 101; read on with startLine 7]")
    }

    @Test func longFileShowsAWindowAndHowToReadOn() async throws {
        let ws = try TempWorkspace()
        try ws.write("big.txt", Self.numbered(250))
        let first = await ws.call(ReadFileTool(), ["path": "big.txt"], tokens: 5000)
        #expect(first.text.hasPrefix("1\tline 1\n"))
        #expect(first.text.contains("100\tline 100\n"))
        #expect(!first.text.contains("101\tline 101"))
        #expect(first.text.hasSuffix("[big.txt lines 1-100 of 250; read on with startLine 101]"))
        let next = await ws.call(ReadFileTool(), ["path": "big.txt", "startLine": 101, "endLine": 120])
        #expect(next.text.hasPrefix("101\tline 101\n"))
        #expect(next.text.hasSuffix("[big.txt lines 101-120 of 250; read on with startLine 121]"))
        let last = await ws.call(ReadFileTool(), ["path": "big.txt", "startLine": "240"])
        #expect(last.text.hasSuffix("[big.txt lines 240-250 of 250; end of file]"))
    }

    @Test func windowShrinksToTheBudget() async throws {
        let ws = try TempWorkspace()
        try ws.write("big.txt", Self.numbered(250))
        let result = await ws.call(ReadFileTool(), ["path": "big.txt"], tokens: 150)
        #expect(result.ok)
        #expect(result.truncated)
        #expect(TokenEstimator.estimate(result.text) <= 150)
        #expect(result.text.contains("of 250; read on with startLine"))
        #expect(!result.text.contains("100\tline 100"))
    }

    @Test func aLineLongerThanTheBudgetIsShownCut() async throws {
        let ws = try TempWorkspace()
        try ws.write("wide.txt", String(repeating: "y", count: 900) + "\nnext\n")
        let result = await ws.call(ReadFileTool(), ["path": "wide.txt"], tokens: 150)
        #expect(result.ok)
        #expect(result.text.hasPrefix("1\tyyy"))
        #expect(result.text.contains("yyy [... line cut]\n[wide.txt lines 1-1 of 2; read on with startLine 2]"))
        #expect(TokenEstimator.estimate(result.text) <= 150)
        let tiny = await ws.call(ReadFileTool(), ["path": "wide.txt"], tokens: 60)
        #expect(tiny.text.hasPrefix("Error: readFile: line 1 of wide.txt does not fit"))
    }

    @Test func pastTheEndAndBackwardsRangesAreErrors() async throws {
        let ws = try TempWorkspace()
        try ws.write("a.txt", "x\ny\n")
        let past = await ws.call(ReadFileTool(), ["path": "a.txt", "startLine": 9])
        #expect(past.text == "Error: readFile: startLine 9 is past the end of a.txt (2 lines)")
        let backwards = await ws.call(ReadFileTool(), ["path": "a.txt", "startLine": 2, "endLine": 1])
        #expect(backwards.text.hasPrefix("Error:"))
        let missing = await ws.call(ReadFileTool(), ["path": "nope.txt"])
        #expect(missing.text == "Error: readFile: nope.txt does not exist. The workspace holds: a.txt.")
        let folder = await ws.call(ReadFileTool(), ["path": "."])
        #expect(folder.text.contains("is a folder"))
    }

    @Test func aMissingFileNamesWhatTheNearestFolderHolds() async throws {
        let ws = try TempWorkspace()
        try ws.write("src/calc.py", "x\n")
        try ws.write("src/util.py", "y\n")
        try ws.write("test_calc.py", "z\n")
        try ws.write(".git/HEAD", "ref\n")
        let guessed = await ws.call(ReadFileTool(), ["path": "path/to/file"])
        #expect(guessed.text == "Error: readFile: path/to/file does not exist. The workspace holds: src/, test_calc.py.")
        let inside = await ws.call(ReadFileTool(), ["path": "src/calc"])
        #expect(inside.text == "Error: readFile: src/calc does not exist. src holds: calc.py, util.py.")
        for index in 0..<25 { try ws.write("many/f\(index < 10 ? "0" : "")\(index).py", "") }
        let crowded = await ws.call(ReadFileTool(), ["path": "many/nope.py"])
        #expect(crowded.text.hasSuffix("f18.py, f19.py, and 5 more."))
    }

    @Test func emptyFileSaysSo() async throws {
        let ws = try TempWorkspace()
        try ws.write("e.txt", "")
        let result = await ws.call(ReadFileTool(), ["path": "e.txt"])
        #expect(result.ok)
        #expect(result.text == "(e.txt is empty)")
    }

    @Test func binaryFileIsRefusedClearly() async throws {
        let ws = try TempWorkspace()
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D]
        bytes += (0..<5000).map { UInt8($0 % 256) }
        #expect(FileManager.default.createFile(atPath: ws.path + "/image.png", contents: Data(bytes)))
        let result = await ws.call(ReadFileTool(), ["path": "image.png"])
        #expect(result.text == "Error: readFile: image.png is a binary file (5012 bytes); the file tools handle UTF-8 text only")
        let edit = await ws.call(EditFileTool(), ["path": "image.png", "oldText": "PNG", "newText": "x"])
        #expect(edit.text.contains("binary"))
        let search = await ws.call(SearchContentTool(), ["pattern": "PNG"])
        #expect(search.text.hasPrefix("[0 matches"))
    }

    @Test func utf8CutMidCharacterAtTheSniffLimitIsStillText() {
        var bytes = Array(repeating: UInt8(ascii: "a"), count: FileIO.sniffBytes - 1)
        bytes += Array("é".utf8).prefix(1)
        #expect(!FileIO.looksBinary(bytes, complete: false))
        #expect(FileIO.looksBinary(bytes, complete: true))
        #expect(FileIO.looksBinary([0x61, 0xFF, 0xFE, 0x61], complete: true))
    }

    @Test func veryLongLinesAreCut() async throws {
        let ws = try TempWorkspace()
        try ws.write("min.js", String(repeating: "x", count: 50_000) + "\nend\n")
        let result = await ws.call(ReadFileTool(), ["path": "min.js"], tokens: 4000)
        #expect(result.text.contains("[... line cut]"))
        #expect(result.text.contains("2\tend"))
        #expect(result.text.utf8.count < 1300)
    }

    /// A 50 MB file: the window comes from the start, the line count covers the whole file, and memory stays
    /// far below the file's size (the scanner holds one 64 KiB chunk).
    @Test func fiftyMegabyteFileIsStreamed() async throws {
        let ws = try TempWorkspace()
        #expect(FileManager.default.createFile(atPath: ws.path + "/huge.log", contents: nil))
        let handle = try #require(FileHandle(forWritingAtPath: ws.path + "/huge.log"))
        let line = String(repeating: "0123456789", count: 9) + "abcdefghi\n"  // 100 bytes
        let block = Data(String(repeating: line, count: 10_000).utf8)  // 1 MB
        for _ in 0..<50 { handle.write(block) }
        try handle.close()
        #expect(Workspace.fileSize(ws.path + "/huge.log") == 50_000_000)

        let before = peakResidentBytes()
        let result = await ws.call(ReadFileTool(), ["path": "huge.log", "startLine": 250_000], tokens: 3000)
        let grown = peakResidentBytes() - before
        #expect(result.ok)
        #expect(result.text.hasPrefix("250000\t0123456789"))
        #expect(result.text.contains("of 500000; read on with startLine"))
        #expect(grown < 30_000_000, "peak memory grew by \(grown) bytes reading a 50 MB file")
        let search = await ws.call(SearchContentTool(), ["pattern": "zzz"])
        #expect(search.text.hasPrefix("[0 matches"))
    }
}

/// Peak resident set size of this process so far, in bytes.
func peakResidentBytes() -> Int {
    var usage = rusage()
    #if os(Linux)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    #if os(Linux)
    return usage.ru_maxrss * 1024
    #else
    return usage.ru_maxrss
    #endif
}
