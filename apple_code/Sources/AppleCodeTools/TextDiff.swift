/// Unified diffs of a file's text before and after writeFile/editFile changed it: the `diff` of their
/// `tool_result` event (contract: stream-json), so a person can see what a run changed. Computed where both texts
/// are known for certain (inside the tool, around its write), never reconstructed afterwards.
public enum TextDiff {
    public static let contextLines = 3
    /// Above this many bytes on either side there is no diff (the event would only hold its first hunks anyway).
    public static let maxInputBytes = 1 << 20
    /// The diff in the event is cut at a line end to this size, with a last line that says so.
    public static let maxDiffBytes = 8 * 1024
    /// Beyond this many differing lines the changed middle becomes one hunk: still a correct diff, less minimal,
    /// and the search stays cheap (its memory grows with the square of this).
    static let maxEdits = 600

    /// The unified diff from `before` (nil: the file did not exist) to `after`, bounded to `maxDiffBytes`;
    /// nil when nothing changed or a side is over `maxInputBytes`.
    public static func unified(path: String, before: String?, after: String) -> String? {
        // Compared as bytes: String's == treats canonically equivalent texts as equal, and a change is a change.
        let same = before.map { $0.utf8.elementsEqual(after.utf8) } ?? false
        guard !same, (before?.utf8.count ?? 0) <= maxInputBytes, after.utf8.count <= maxInputBytes else {
            return nil
        }
        let old = lines(of: before ?? "")
        let new = lines(of: after)
        let header = ["--- " + (before == nil ? "/dev/null" : "a/" + path), "+++ b/" + path]
        let body = hunks(edits(old, new), old: old, new: new)
        return bounded(header + body)
    }

    // MARK: lines and the edit script

    /// Lines with their `\n` kept, so a last line without one differs from the same line with one. Split on
    /// the byte (a `\r\n` is one Character, which a search for "\n" would not find).
    static func lines(of text: String) -> [Substring] {
        var result: [Substring] = []
        var start = text.utf8.startIndex
        while let newline = text.utf8[start...].firstIndex(of: 0x0A) {
            let end = text.utf8.index(after: newline)
            result.append(text[start..<end])
            start = end
        }
        if start < text.utf8.endIndex { result.append(text[start...]) }
        return result
    }

    enum Edit: Equatable {
        case same(old: Int, new: Int)
        case delete(old: Int)
        case insert(new: Int)
    }

    /// The shortest edit script (Myers) between the lines after their common start and end are set aside.
    static func edits(_ old: [Substring], _ new: [Substring]) -> [Edit] {
        // Lines as numbers, one per distinct byte sequence (not Substring's ==, which is canonical equivalence).
        var ids: [[UInt8]: Int] = [:]
        func id(_ line: Substring) -> Int {
            let bytes = Array(line.utf8)
            if let known = ids[bytes] { return known }
            ids[bytes] = ids.count
            return ids.count - 1
        }
        let a = old.map(id)
        let b = new.map(id)
        var prefix = 0
        while prefix < a.count, prefix < b.count, a[prefix] == b[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < a.count - prefix, suffix < b.count - prefix, a[a.count - 1 - suffix] == b[b.count - 1 - suffix] {
            suffix += 1
        }
        let middleA = Array(a[prefix..<(a.count - suffix)])
        let middleB = Array(b[prefix..<(b.count - suffix)])
        var script = (0..<prefix).map { Edit.same(old: $0, new: $0) }
        let middle = myers(middleA, middleB) ?? (middleA.indices.map { Edit.delete(old: $0) }
            + middleB.indices.map { Edit.insert(new: $0) })
        for edit in middle {
            switch edit {
            case .same(let i, let j): script.append(.same(old: i + prefix, new: j + prefix))
            case .delete(let i): script.append(.delete(old: i + prefix))
            case .insert(let j): script.append(.insert(new: j + prefix))
            }
        }
        for k in 0..<suffix {
            script.append(.same(old: a.count - suffix + k, new: b.count - suffix + k))
        }
        return script
    }

    /// Myers' O(ND) search; nil when more than `maxEdits` lines differ.
    static func myers(_ a: [Int], _ b: [Int]) -> [Edit]? {
        let n = a.count, m = b.count
        let limit = min(n + m, maxEdits)
        let offset = limit + 1
        var v = [Int](repeating: 0, count: 2 * limit + 3)
        // trace[d][k + d] is the furthest x on diagonal k after d edits.
        var trace: [[Int]] = []
        for d in 0...limit {
            var row = [Int](repeating: 0, count: 2 * d + 1)
            for k in stride(from: -d, through: d, by: 2) {
                var x: Int
                if d == 0 {
                    x = 0
                } else if k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]) {
                    x = v[offset + k + 1]
                } else {
                    x = v[offset + k - 1] + 1
                }
                var y = x - k
                while x < n, y < m, a[x] == b[y] { x += 1; y += 1 }
                v[offset + k] = x
                row[k + d] = x
                if x >= n, y >= m {
                    trace.append(row)
                    return backtrack(trace, n: n, m: m)
                }
            }
            trace.append(row)
        }
        return nil
    }

    private static func backtrack(_ trace: [[Int]], n: Int, m: Int) -> [Edit] {
        var script: [Edit] = []
        var x = n, y = m
        for d in stride(from: trace.count - 1, to: 0, by: -1) {
            let previous = trace[d - 1]
            func furthest(_ k: Int) -> Int { previous[k + d - 1] }
            let k = x - y
            let down = k == -d || (k != d && furthest(k - 1) < furthest(k + 1))
            let previousK = down ? k + 1 : k - 1
            let previousX = furthest(previousK)
            let previousY = previousX - previousK
            while x > previousX, y > previousY {
                x -= 1; y -= 1
                script.append(.same(old: x, new: y))
            }
            if down { y -= 1; script.append(.insert(new: y)) } else { x -= 1; script.append(.delete(old: x)) }
        }
        while x > 0, y > 0 {
            x -= 1; y -= 1
            script.append(.same(old: x, new: y))
        }
        return script.reversed()
    }

    // MARK: unified format

    static func hunks(_ script: [Edit], old: [Substring], new: [Substring]) -> [String] {
        let changed = script.indices.filter { if case .same = script[$0] { false } else { true } }
        guard let first = changed.first else { return [] }
        // Groups of changes whose gaps are short enough to share their context.
        var groups: [(start: Int, end: Int)] = [(first, first)]
        for index in changed.dropFirst() {
            if index - groups[groups.count - 1].end <= 2 * contextLines + 1 {
                groups[groups.count - 1].end = index
            } else {
                groups.append((index, index))
            }
        }
        var output: [String] = []
        for group in groups {
            let lower = max(0, group.start - contextLines)
            let upper = min(script.count - 1, group.end + contextLines)
            let slice = script[lower...upper]
            var oldStart = 0, newStart = 0, oldCount = 0, newCount = 0
            var found = (old: false, new: false)
            var body: [String] = []
            for edit in slice {
                switch edit {
                case .same(let i, let j):
                    if !found.old { oldStart = i; found.old = true }
                    if !found.new { newStart = j; found.new = true }
                    oldCount += 1; newCount += 1
                    body += render(" ", old[i])
                case .delete(let i):
                    if !found.old { oldStart = i; found.old = true }
                    oldCount += 1
                    body += render("-", old[i])
                case .insert(let j):
                    if !found.new { newStart = j; found.new = true }
                    newCount += 1
                    body += render("+", new[j])
                }
            }
            if !found.old { oldStart = position(before: lower, in: script, old: true) }
            if !found.new { newStart = position(before: lower, in: script, old: false) }
            output.append("@@ -\(range(oldStart, oldCount)) +\(range(newStart, newCount)) @@")
            output += body
        }
        return output
    }

    /// A side with no lines in the hunk: the index of the line before it (as `range` then shows it).
    private static func position(before index: Int, in script: [Edit], old: Bool) -> Int {
        var count = 0
        for edit in script[..<index] {
            switch edit {
            case .same: count += 1
            case .delete: if old { count += 1 }
            case .insert: if !old { count += 1 }
            }
        }
        return count - 1
    }

    /// `start,count` as unified diffs write it: 1-based, and for an empty side the line before it.
    private static func range(_ start: Int, _ count: Int) -> String {
        count == 0 ? "\(start + 1),0" : count == 1 ? "\(start + 1)" : "\(start + 1),\(count)"
    }

    private static func render(_ mark: String, _ line: Substring) -> [String] {
        if line.utf8.last == 0x0A { return [mark + String(decoding: line.utf8.dropLast(), as: UTF8.self)] }
        return [mark + line, "\\ No newline at end of file"]
    }

    /// The lines joined, cut at a line end within `maxDiffBytes` with a last line saying how many were left out.
    static func bounded(_ lines: [String]) -> String {
        var kept: [String] = []
        var size = 0
        let room = maxDiffBytes - 64
        for (index, line) in lines.enumerated() {
            let cost = line.utf8.count + 1
            if size + cost > room {
                let shown = kept.isEmpty ? "" : kept.joined(separator: "\n") + "\n"
                return shown + "[... diff cut: \(lines.count - index) more lines]\n"
            }
            kept.append(line)
            size += cost
        }
        return kept.joined(separator: "\n") + "\n"
    }
}
