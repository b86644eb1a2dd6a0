/// A deterministic, conservative token estimate used for every budget decision.
///
/// Real tokenizers average about 4 characters a token on English and code; this counts one token for every
/// 3 UTF-8 bytes (rounded up) plus one per text, so it over-estimates ASCII by about a third and non-ASCII
/// text (2-4 bytes a character) more. Over-estimating keeps requests inside the window.
public enum TokenEstimator {
    public static func estimate(_ text: String) -> Int {
        (text.utf8.count + 2) / 3 + 1
    }

    /// The largest UTF-8 byte count whose estimate fits `tokens`.
    public static func bytes(forTokens tokens: Int) -> Int {
        max(0, (tokens - 1) * 3)
    }

    /// Cuts `text` to fit `tokens`, keeping the head and the tail and saying what was cut in between.
    /// Returns the text unchanged when it fits.
    public static func cut(_ text: String, toTokens tokens: Int, headShare: Double = 0.7) -> (text: String, truncated: Bool) {
        if estimate(text) <= tokens { return (text, false) }
        let budget = bytes(forTokens: tokens)
        let markerReserve = 80
        guard budget > markerReserve + 16 else {
            let marker = "[... cut: \(text.utf8.count) bytes did not fit the context budget]"
            return (prefix(marker, bytes: budget), true)
        }
        let usable = budget - markerReserve
        let headBytes = Int(Double(usable) * headShare)
        let tailBytes = usable - headBytes
        let head = prefix(text, bytes: headBytes)
        let tail = suffix(text, bytes: tailBytes)
        let omitted = text.utf8.count - head.utf8.count - tail.utf8.count
        return (head + "\n[... \(omitted) bytes cut to fit the context budget ...]\n" + tail, true)
    }

    /// The longest prefix of whole characters within `bytes` UTF-8 bytes.
    public static func prefix(_ text: String, bytes: Int) -> String {
        var count = 0
        var end = text.startIndex
        for index in text.indices {
            let size = text[index].utf8.count
            if count + size > bytes { break }
            count += size
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    /// The longest suffix of whole characters within `bytes` UTF-8 bytes.
    public static func suffix(_ text: String, bytes: Int) -> String {
        var count = 0
        var start = text.endIndex
        while start > text.startIndex {
            let previous = text.index(before: start)
            let size = text[previous].utf8.count
            if count + size > bytes { break }
            count += size
            start = previous
        }
        return String(text[start...])
    }
}
