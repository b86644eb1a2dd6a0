#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AppleCodeCore

/// `editFile(path, oldText, newText)`: replaces one exact, unique occurrence. On no match or several it
/// changes nothing and answers with the nearest lines (did-you-mean), which helps a small model retry.
public struct EditFileTool: WorkspaceTool {
    /// Larger files are not edited in memory; the model can rewrite them with runCommand tools instead.
    public static let maxFileBytes = 8 << 20

    public let spec = ToolSpec(
        name: "editFile",
        description: "Replace unique exact oldText with newText.",
        parameters: [
            ParameterSpec("path", .string, ""),
            ParameterSpec("oldText", .string, ""),
            ParameterSpec("newText", .string, ""),
        ])

    public init() {}

    public func perform(_ arguments: ToolArguments, in workspace: Workspace, context: ToolContext) async throws
        -> ToolResult {
        let target = try workspace.resolve(arguments.string("path") ?? "")
        try GitInternals.refuseWrite(to: target, in: workspace)
        let name = target.relative
        let oldText = arguments.string("oldText") ?? ""
        let newText = arguments.string("newText") ?? ""
        if oldText.isEmpty { throw ToolFailure("oldText is empty; use writeFile to create a file") }
        // Small models "fix" a file by copying what they read: say nothing would change rather than succeed.
        if oldText == newText {
            throw ToolFailure("newText is the same as oldText, so nothing would change; put the corrected text in newText")
        }
        let fd = try FileIO.openText(target, in: workspace)
        let bytes: [UInt8]
        do {
            defer { close(fd) }
            bytes = try FileIO.readAll(fd: fd, limit: Self.maxFileBytes)
        }
        // The binary sniff saw only the start: a decoding that repaired bytes further on would rewrite them.
        guard let original = String(validating: bytes, as: UTF8.self) else {
            throw ToolFailure("\(name) is not valid UTF-8 throughout; the file tools edit UTF-8 text only, so "
                + "nothing changed")
        }
        let plan: Replacement
        var note = ""
        do {
            plan = try Self.replacement(in: original, oldText: oldText, newText: newText, name: name)
        } catch let failure as ToolFailure {
            // Not found as given: perhaps copied from readFile's result with its line numbers.
            let new = ReadFileEcho.withoutLineNumbers(newText, firstMayLack: true) ?? newText
            guard let old = ReadFileEcho.withoutLineNumbers(oldText, firstMayLack: true), old != new,
                  let echoed = try? Self.replacement(in: original, oldText: old, newText: new, name: name) else {
                throw failure
            }
            plan = echoed
            note = " (the line numbers readFile shows were left out of oldText and newText)"
        }
        try FileIO.writeFile(Array(plan.text.utf8), to: target.absolute, shown: name)
        let lineNote = plan.firstLine == plan.lastLine ? "line \(plan.firstLine)" :
            "lines \(plan.firstLine)-\(plan.lastLine)"
        return ToolResult(text: "Edited \(name): replaced 1 occurrence at \(lineNote)\(note)",
                          summary: "edited \(name) \(lineNote)", filesChanged: [name],
                          diff: TextDiff.unified(path: name, before: original, after: plan.text))
    }

    struct Replacement: Equatable {
        let text: String
        let firstLine: Int
        let lastLine: Int
    }

    /// The file text after replacing the single occurrence of `oldText`, or a failure carrying the hint.
    /// A file with CRLF line ends also matches an `oldText` written with plain newlines.
    static func replacement(in original: String, oldText: String, newText: String, name: String) throws
        -> Replacement {
        var old = oldText
        var new = newText
        var ranges = occurrences(of: old, in: original)
        if ranges.isEmpty, original.contains("\r\n"), !oldText.contains("\r\n") {
            old = oldText.replacing("\n", with: "\r\n")
            new = newText.replacing("\n", with: "\r\n")
            ranges = occurrences(of: old, in: original)
        }
        guard ranges.count == 1, let range = ranges.first else {
            if ranges.isEmpty {
                throw ToolFailure("oldText not found in \(name); nothing changed." + nearestLines(to: oldText,
                                                                                               in: original))
            }
            let lines = ranges.prefix(10).map { String(lineNumber(of: $0.lowerBound, in: original)) }
            throw ToolFailure("oldText occurs \(ranges.count) times in \(name) (lines "
                + lines.joined(separator: ", ") + "); nothing changed. Include more surrounding lines to make it unique.")
        }
        let firstLine = lineNumber(of: range.lowerBound, in: original)
        let text = String(original[..<range.lowerBound]) + new + String(original[range.upperBound...])
        let newLines = new.split(separator: "\n", omittingEmptySubsequences: false).count
        return Replacement(text: text, firstLine: firstLine, lastLine: firstLine + max(newLines, 1) - 1)
    }

    /// Non-overlapping occurrences, compared byte for byte (String's `==` would treat canonically equivalent
    /// texts as equal and "exact" would not be).
    static func occurrences(of needle: String, in haystack: String) -> [Range<String.Index>] {
        let hay = Array(haystack.utf8)
        let pin = Array(needle.utf8)
        guard !pin.isEmpty, pin.count <= hay.count else { return [] }
        var found: [Range<String.Index>] = []
        var start = 0
        // memchr for the first byte, memcmp for the rest (memmem is not portable).
        hay.withUnsafeBytes { hayRaw in
            pin.withUnsafeBytes { pinRaw in
                guard let hayBase = hayRaw.baseAddress, let pinBase = pinRaw.baseAddress else { return }
                while start + pin.count <= hay.count {
                    guard let hit = memchr(hayBase + start, Int32(pin[0]), hay.count - pin.count + 1 - start) else {
                        break
                    }
                    let offset = hayBase.distance(to: UnsafeRawPointer(hit))
                    if memcmp(hayBase + offset, pinBase, pin.count) == 0 {
                        let lower = haystack.utf8.index(haystack.utf8.startIndex, offsetBy: offset)
                        found.append(lower..<haystack.utf8.index(lower, offsetBy: pin.count))
                        start = offset + pin.count
                    } else {
                        start = offset + 1
                    }
                }
            }
        }
        return found
    }

    static func lineNumber(of index: String.Index, in text: String) -> Int {
        text.utf8[..<index].reduce(1) { $1 == 0x0A ? $0 + 1 : $0 }
    }

    /// "Did you mean" text: the file lines most like `oldText`, numbered, or nothing when none is close.
    /// The anchor is the longest line of oldText; the window around its best match has oldText's height.
    static func nearestLines(to oldText: String, in original: String) -> String {
        let fileLines = original.split(separator: "\n", omittingEmptySubsequences: false)
        let oldLines = oldText.split(separator: "\n", omittingEmptySubsequences: false)
        guard let anchorIndex = oldLines.indices.max(by: {
            oldLines[$0].trimmed.count < oldLines[$1].trimmed.count
        }) else { return "" }
        let anchor = oldLines[anchorIndex].trimmed
        guard !anchor.isEmpty else { return "" }
        let anchorGrams = bigrams(anchor)
        var best = (score: 0.0, line: -1)
        for (index, line) in fileLines.enumerated().prefix(50_000) {
            let score = similarity(anchorGrams, bigrams(line.trimmed))
            if score > best.score { best = (score, index) }
        }
        guard best.line >= 0, best.score >= 0.4 else { return " No similar lines found; read the file first." }
        let first = max(0, best.line - anchorIndex)
        let last = min(fileLines.count - 1, first + max(oldLines.count, 1) - 1)
        let shown = (first...last).map { "\($0 + 1)\t\(fileLines[$0].prefix(FileIO.maxLineBytes))" }
        let hint = best.score == 1 ? "Did you mean these lines (whitespace differs)?" : "Did you mean these lines?"
        return " \(hint)\n" + shown.joined(separator: "\n")
    }

    private static func bigrams(_ text: Substring) -> Set<UInt32> {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count > 1 else { return Set(scalars.map(\.value)) }
        return Set((0..<(scalars.count - 1)).map { scalars[$0].value &* 31 &+ scalars[$0 + 1].value })
    }

    /// Dice coefficient of two bigram sets: 1 for the same text, 0 for nothing in common.
    private static func similarity(_ a: Set<UInt32>, _ b: Set<UInt32>) -> Double {
        guard !a.isEmpty, !b.isEmpty else { return 0 }
        return 2 * Double(a.intersection(b).count) / Double(a.count + b.count)
    }
}

extension Substring {
    fileprivate var trimmed: Substring {
        var s = self
        while let first = s.first, first.isWhitespace { s = s.dropFirst() }
        while let last = s.last, last.isWhitespace { s = s.dropLast() }
        return s
    }
}
