import Foundation

/// A JSON value with object keys kept in insertion order, so events and requests serialise deterministically
/// (`{"type":...}` first) without Codable plumbing.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public static func int(_ value: Int) -> JSONValue { .number(Double(value)) }
}

/// An ordered JSON object.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String] = []
    private var storage: [String: JSONValue] = [:]

    public init() {}

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        for (key, value) in elements { self[key] = value }
    }

    public subscript(key: String) -> JSONValue? {
        get { storage[key] }
        set {
            if let newValue {
                if storage.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if storage.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    public var count: Int { keys.count }
    public var entries: [(key: String, value: JSONValue)] { keys.compactMap { k in storage[k].map { (k, $0) } } }
}

// MARK: - Accessors

extension JSONValue {
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var doubleValue: Double? { if case .number(let n) = self { n } else { nil } }
    /// An integer value; also accepts a whole-number double (JSON has one number type).
    public var intValue: Int? {
        guard case .number(let n) = self, n.rounded() == n, abs(n) < 9.0e15 else { return nil }
        return Int(n)
    }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var objectValue: JSONObject? { if case .object(let o) = self { o } else { nil } }
    public subscript(key: String) -> JSONValue? { objectValue?[key] }
}

// MARK: - Serialisation

extension JSONValue {
    /// Compact JSON text (no spaces, no newlines; `/` not escaped).
    public var jsonText: String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            if n.isFinite, n.rounded() == n, abs(n) < 9.0e15 {
                out += String(Int64(n))
            } else if n.isFinite {
                out += String(n)
            } else {
                out += "null"
            }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let object):
            out += "{"
            for (i, entry) in object.entries.enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(entry.key, into: &out)
                out += ":"
                entry.value.write(into: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20 || c.value == 0x2028 || c.value == 0x2029:
                out += "\\u" + String(repeating: "0", count: 4 - String(c.value, radix: 16).count)
                    + String(c.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

// MARK: - Parsing

public struct JSONParseError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

extension JSONValue {
    /// Parses JSON text (any top-level value). Object key order follows the text.
    public static func parse(_ text: String) throws -> JSONValue {
        var parser = JSONTextParser(Array(text.utf8))
        return try parser.parseDocument()
    }

    /// Parses JSON a model wrote by hand, where strict parsing failed: small models put raw newlines and tabs
    /// inside strings and leave quotes in the code they quote unescaped (`"content": "x = "a""`). Here a control
    /// character in a string is kept as it is, an unknown escape keeps its backslash, and a quote ends a string
    /// only where the JSON around it goes on (before `:` after a key, `}` or `,` and the next key after a value,
    /// `]` or `,` and a value in an array); any other quote is part of the text; a Python raw string `r"..."` is
    /// taken as a string. Strict JSON parses to the same value as `parse`.
    public static func parseLenient(_ text: String) throws -> JSONValue {
        var parser = JSONTextParser(Array(text.utf8), lenient: true)
        return try parser.parseDocument()
    }

    /// JSON from a model: strict first (its error is the one reported), then `parseLenient`.
    public static func parseModelWritten(_ text: String) throws -> JSONValue {
        do {
            return try parse(text)
        } catch {
            guard let repaired = try? parseLenient(text) else { throw error }
            return repaired
        }
    }
}

/// A small JSON parser that keeps object key order (JSONSerialization does not); strict unless `lenient`.
private struct JSONTextParser {
    /// Where a string stands, which decides what may follow its closing quote in lenient mode.
    enum StringRole { case key, objectValue, arrayItem, document }

    let bytes: [UInt8]
    let lenient: Bool
    var index = 0
    var depth = 0

    init(_ bytes: [UInt8], lenient: Bool = false) {
        self.bytes = bytes
        self.lenient = lenient
    }

    mutating func parseDocument() throws -> JSONValue {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected text after the JSON value") }
        return value
    }

    func fail(_ message: String) -> JSONParseError {
        JSONParseError(description: "invalid JSON at byte \(index): \(message)")
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue(as role: StringRole = .document) throws -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString(as: role))
        case UInt8(ascii: "r") where lenient && index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "\""):
            // A Python raw string (`r"word_counts\(\)"`, seen as a search pattern): its backslashes are unknown
            // escapes here, which lenient parsing keeps.
            index += 1
            return .string(try parseString(as: role))
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        default: return try parseNumber()
        }
    }

    mutating func expect(_ word: String) throws {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else {
            throw fail("expected \(word)")
        }
        index += w.count
    }

    mutating func enter() throws {
        depth += 1
        if depth > 512 { throw fail("nesting too deep") }
    }

    mutating func parseObject() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var object = JSONObject()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let key = try parseString(as: .key)
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            object[key] = try parseValue(as: .objectValue)
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue(as: .arrayItem))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseString(as role: StringRole) throws -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ parser: JSONTextParser, _ end: Int, into view: inout String.UnicodeScalarView) {
            if end > runStart {
                view.append(contentsOf: String(decoding: parser.bytes[runStart..<end], as: UTF8.self).unicodeScalars)
            }
        }
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\""), !lenient || closes(at: index, as: role) {
                flush(self, index, into: &scalars)
                index += 1
                return String(scalars)
            }
            if b < 0x20, !lenient { throw fail("control character in string") }
            if b == UInt8(ascii: "\\") {
                flush(self, index, into: &scalars)
                index += 1
                guard index < bytes.count else { break }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    scalars.append(try parseUnicodeEscape())
                default:
                    guard lenient else { throw fail("bad escape") }
                    index -= 1  // `\d` in a regex the model quoted: the backslash and the character stay
                    scalars.append("\\")
                }
                runStart = index
                continue
            }
            index += 1
        }
        throw fail("unterminated string")
    }

    /// Lenient mode: whether the quote at `quote` ends the string in `role`, judged by what follows it.
    func closes(at quote: Int, as role: StringRole) -> Bool {
        var next = skippingWhitespace(from: quote + 1)
        guard next < bytes.count else { return true }
        let follower = bytes[next]
        switch role {
        case .key: return follower == UInt8(ascii: ":")
        case .document: return false
        case .objectValue:
            if follower == UInt8(ascii: "}") { return true }
            guard follower == UInt8(ascii: ",") else { return false }
            next = skippingWhitespace(from: next + 1)
            return startsKey(at: next)
        case .arrayItem:
            if follower == UInt8(ascii: "]") { return true }
            guard follower == UInt8(ascii: ",") else { return false }
            next = skippingWhitespace(from: next + 1)
            return next < bytes.count && "\"{[-0123456789tfn".utf8.contains(bytes[next])
        }
    }

    /// Whether a key (`"name"` then `:`) starts at `start`: the test that a `,` after a quote goes on the object.
    private func startsKey(at start: Int) -> Bool {
        guard start < bytes.count, bytes[start] == UInt8(ascii: "\"") else { return false }
        var cursor = start + 1
        while cursor < bytes.count, bytes[cursor] != UInt8(ascii: "\""), bytes[cursor] >= 0x20 {
            cursor += bytes[cursor] == UInt8(ascii: "\\") ? 2 : 1
        }
        guard cursor < bytes.count, bytes[cursor] == UInt8(ascii: "\"") else { return false }
        let after = skippingWhitespace(from: cursor + 1)
        return after < bytes.count && bytes[after] == UInt8(ascii: ":")
    }

    private func skippingWhitespace(from start: Int) -> Int {
        var cursor = start
        while cursor < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[cursor]) { cursor += 1 }
        return cursor
    }

    /// The scalar of a `\uXXXX` escape (the `\u` already read), joined with a following low-surrogate escape
    /// into one scalar. A lone surrogate becomes U+FFFD; an escape after it that does not complete the pair is
    /// left for the next round, so nothing after a lone surrogate is lost.
    mutating func parseUnicodeEscape() throws -> Unicode.Scalar {
        let code = try parseHex4()
        if (0xD800..<0xDC00).contains(code), index + 1 < bytes.count,
           bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
            let escapeStart = index
            index += 2
            let low = try parseHex4()
            if (0xDC00..<0xE000).contains(low) {
                return Unicode.Scalar(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)) ?? "\u{FFFD}"
            }
            index = escapeStart
        }
        return Unicode.Scalar(code) ?? "\u{FFFD}"
    }

    mutating func parseHex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("bad hex digit")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws -> JSONValue {
        let start = index
        while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
        guard index > start, let n = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
            throw fail("unexpected character")
        }
        // Infinity has no JSON form (`jsonText` would write it as null): refuse it here.
        guard n.isFinite else { throw fail("number out of range") }
        return .number(n)
    }
}

// MARK: - Literals

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject()
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}
