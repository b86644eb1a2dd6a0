import Testing
@testable import AppleCodeCore

/// Direct tests of `JSONValue.parse`: what models and servers send is not always well formed, and a parse that
/// silently drops text changes a tool's arguments.
@Suite struct JSONParserTests {
    private func string(_ json: String) throws -> String? { try JSONValue.parse(json).stringValue }

    @Test func surrogatePairsBecomeOneScalar() throws {
        #expect(try string(#""\uD83D\uDE00""#) == "😀")
        #expect(try string(#""a\ud834\udd1eb""#) == "a𝄞b")
        #expect(try string(#""\uDBFF\uDFFF""#) == "\u{10FFFF}")
    }

    /// A lone surrogate becomes U+FFFD and nothing after it is lost: the escape that follows is decoded on its
    /// own (`"\uD800\u0041"` once lost its `A`).
    @Test(arguments: [
        (#""\uD800\u0041""#, "\u{FFFD}A"),
        (#""\uD800""#, "\u{FFFD}"),
        (#""\uD800x""#, "\u{FFFD}x"),
        (#""\uDC00""#, "\u{FFFD}"),
        (#""\uDC00\uDC00!""#, "\u{FFFD}\u{FFFD}!"),
        (#""\uD800\uD83D\uDE00""#, "\u{FFFD}😀"),
        (#""\uD800\n""#, "\u{FFFD}\n"),
        (#""\uD800\\u0041""#, "\u{FFFD}\\u0041"),
    ])
    func loneSurrogatesKeepWhatFollows(json: String, expected: String) throws {
        #expect(try string(json) == expected)
    }

    @Test func escapesAndRawText() throws {
        #expect(try string(#""\"\\\/\b\f\n\r\t""#) == "\"\\/\u{08}\u{0C}\n\r\t")
        #expect(try string(#""\u00e9\u0000é日本""#) == "é\u{0}é日本")
    }

    @Test(arguments: [
        (#""\x41""#, "bad escape"),
        (#""\u12G4""#, "bad hex digit"),
        (#""\u12""#, "short \\u escape"),
        (#""\uD800\u12""#, "short \\u escape"),
        (#""abc"#, "unterminated string"),
        (#""abc\"#, "unterminated string"),
        ("\"a\u{1}b\"", "control character in string"),
        ("\"a\nb\"", "control character in string"),
    ])
    func invalidStringsAreErrors(json: String, message: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(json) }
        #expect(Self.error(json).contains(message), "\(Self.error(json))")
    }

    @Test func nestingUpToTheLimitParsesAndDeeperIsAnError() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        var value = try JSONValue.parse(deepest)
        var depth = 0
        while case .array(let items) = value, let first = items.first {
            value = first
            depth += 1
        }
        #expect(depth == 511)
        #expect(Self.error(String(repeating: "[", count: 513) + String(repeating: "]", count: 513))
            .contains("nesting too deep"))
        // Far deeper input is refused by the same limit, never by a stack overflow.
        #expect(Self.error(String(repeating: #"{"a":"#, count: 100_000)).contains("nesting too deep"))
    }

    @Test(arguments: ["{} x", "1 2", "[1]]", "\"a\"\"b\"", "null,", "truex", "{}\u{0}"])
    func trailingTextIsAnError(json: String) {
        #expect(Self.error(json).contains("unexpected text after the JSON value"), "\(Self.error(json))")
    }

    @Test func surroundingWhitespaceIsAllowed() throws {
        #expect(try JSONValue.parse(" \n\t{\"a\" : [ 1 , 2 ] }\r\n ") == ["a": [1, 2]])
    }

    @Test func numbersAtTheLimits() throws {
        #expect(try JSONValue.parse("1.7976931348623157e308") == .number(.greatestFiniteMagnitude))
        #expect(try JSONValue.parse("-1.7976931348623157e308") == .number(-.greatestFiniteMagnitude))
        #expect(try JSONValue.parse("5e-324") == .number(.leastNonzeroMagnitude))
        #expect(try JSONValue.parse("1e-400") == .number(0))
        #expect(try JSONValue.parse("-0").doubleValue?.sign == .minus)
        #expect(try JSONValue.parse("9007199254740993") == .number(9_007_199_254_740_992))
        #expect(try JSONValue.parse("8999999999999999").intValue == 8_999_999_999_999_999)
        #expect(try JSONValue.parse("9000000000000001").intValue == nil)
        #expect(try JSONValue.parse("123456789012345").intValue == 123_456_789_012_345)
        #expect(try JSONValue.parse("1E+2") == .number(100))
    }

    /// A number too large for a Double is an error, not infinity (which `jsonText` would write as `null`).
    @Test(arguments: ["1e309", "-1e309", "[1e99999]"])
    func numbersBeyondDoubleAreErrors(json: String) {
        #expect(Self.error(json).contains("number out of range"), "\(Self.error(json))")
    }

    @Test(arguments: ["", " ", "-", "1e", "+", ".", "[,]", "{\"a\"}", "{\"a\":}", "[1,]", "nul", "{1:2}"])
    func malformedInputIsAnError(json: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(json) }
    }

    @Test func duplicateKeysKeepTheLastValueInTheFirstPosition() throws {
        let value = try JSONValue.parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(value.objectValue?.keys == ["a", "b"])
        #expect(value["a"] == 3)
    }

    private static func error(_ json: String) -> String {
        do {
            _ = try JSONValue.parse(json)
            return "parsed without error"
        } catch {
            return "\(error)"
        }
    }

    // MARK: lenient parsing of JSON a model wrote

    /// What the 1.5B wrote, seen in bench runs: raw newlines in a string, a docstring's quotes unescaped.
    @Test func lenientKeepsRawNewlinesAndUnescapedQuotesInsideStrings() throws {
        let written = "{\"path\": \"paginate.py\", \"oldText\": \"return total // per_page\n\", "
            + "\"newText\": \"def f():\n    \"\"\"Doc.\"\"\"\n    return d[\"k\"], {\"a\": 1}\"}"
        #expect(throws: JSONParseError.self) { try JSONValue.parse(written) }
        let object = try #require(JSONValue.parseLenient(written).objectValue)
        #expect(object.keys == ["path", "oldText", "newText"])
        #expect(object["oldText"]?.stringValue == "return total // per_page\n")
        #expect(object["newText"]?.stringValue == "def f():\n    \"\"\"Doc.\"\"\"\n    return d[\"k\"], {\"a\": 1}")
    }

    @Test(arguments: [
        (#"{"a": "print("x", "y")", "b": "2"}"#, "a", #"print("x", "y")"#),  // a comma, but no key after it
        (#"{"re": "\d+\.\w"}"#, "re", #"\d+\.\w"#),  // unknown escapes keep the backslash
        (#"{"s": "tab\there"}"#, "s", "tab\there"),
        // A Python raw string, seen from the 1.5B as a search pattern (the whole reply: a call written as text).
        (#"{"pattern": r"word_counts\(\)", "path": "tally.py"}"#, "pattern", #"word_counts\(\)"#),
        ("{\"s\": \"a\tb\"}", "s", "a\tb"),  // a raw tab
    ])
    func lenientReadsCodeQuotedCarelessly(json: String, key: String, expected: String) throws {
        #expect(try JSONValue.parseLenient(json).objectValue?[key]?.stringValue == expected)
    }

    @Test(arguments: [
        #"{"a": [1, "two", {"b": null}], "c": true, "d": -1.5e2, "e": "\"q\" \u00e9"}"#,
        #"["x", "y", ["z"]]"#,
        #""just a string""#,
    ])
    func lenientAgreesWithStrictOnValidJSON(json: String) throws {
        #expect(try JSONValue.parseLenient(json) == JSONValue.parse(json))
        #expect(try JSONValue.parseModelWritten(json) == JSONValue.parse(json))
    }

    @Test func lenientStillRefusesWhatIsNotJSON() {
        for text in [#"{"a": "unterminated"#, #"{"a" 1}"#, "{path: 1}", #"{"a": "b"} trailing"#, #"{"a": r}"#,
                     #"{"a": rb"x"}"#] {
            #expect(throws: JSONParseError.self) { try JSONValue.parseLenient(text) }
        }
    }

    /// The strict parser's error is the one reported when neither parse works.
    @Test func modelWrittenReportsTheStrictError() {
        do {
            _ = try JSONValue.parseModelWritten(#"{"a" 1}"#)
            Issue.record("parsed")
        } catch {
            #expect("\(error)".contains("expected ':'"))
        }
    }
}
