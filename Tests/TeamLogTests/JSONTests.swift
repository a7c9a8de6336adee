import Testing

@testable import TeamLog

@Suite struct JSONTests {
    // MARK: - Fixtures

    /// An input that must fail, with the expected error position and a fragment of the message.
    struct BadDocument: Sendable, CustomTestStringConvertible {
        let input: [UInt8]
        let offset: Int
        let message: String

        init(_ input: String, at offset: Int, _ message: String) {
            self.init(Array(input.utf8), at: offset, message)
        }

        init(_ input: [UInt8], at offset: Int, _ message: String) {
            self.input = input
            self.offset = offset
            self.message = message
        }

        var testDescription: String { String(decoding: input, as: UTF8.self).debugDescription }
    }

    /// Tiny deterministic RNG (SplitMix64) so random tests are reproducible without Foundation.
    struct SplitMix64 {
        var state: UInt64

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        mutating func below(_ bound: Int) -> Int {
            Int(next() % UInt64(bound))
        }
    }

    static func quoted(_ body: [UInt8]) -> [UInt8] {
        [UInt8(ascii: "\"")] + body + [UInt8(ascii: "\"")]
    }

    static func parseBytes(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try JSONParser.parse(bytes)
    }

    /// The error a parse throws, or nil when it succeeds.
    static func parseError(_ bytes: [UInt8]) -> JSONParseError? {
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    static func parseError(_ text: String) -> JSONParseError? {
        parseError(Array(text.utf8))
    }

    static func written(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter()
        writer.write(value)
        return writer.bytes
    }

    // MARK: - Valid documents

    static let validDocuments: [(String, JSONValue)] = [
        ("null", .null),
        ("true", .bool(true)),
        ("false", .bool(false)),
        ("0", .int(0)),
        ("-0", .int(0)),
        ("7", .int(7)),
        ("-42", .int(-42)),
        ("1234567890123", .int(1_234_567_890_123)),
        ("9223372036854775807", .int(Int64.max)),
        ("-9223372036854775808", .int(Int64.min)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)),
        ("-9223372036854775809", .double(-9_223_372_036_854_775_808)),  // nearest Double is -2^63
        ("123456789012345678901234567890", .double(1.2345678901234568e29)),
        ("1.5", .double(1.5)),
        ("-0.0", .double(-0.0)),
        ("0.1", .double(0.1)),
        ("1e2", .double(100)),
        ("1E+2", .double(100)),
        ("-1.25e-3", .double(-0.00125)),
        ("1e22", .double(1e22)),
        ("1e23", .double(1e23)),
        ("1e400", .double(.infinity)),
        ("-1e400", .double(-.infinity)),
        ("1e-400", .double(0)),
        ("1.7976931348623157e308", .double(.greatestFiniteMagnitude)),
        ("5e-324", .double(.leastNonzeroMagnitude)),
        ("2.2250738585072014e-308", .double(.leastNormalMagnitude)),
        ("0.30000000000000004", .double(0.30000000000000004)),
        ("9007199254740993", .int(9_007_199_254_740_993)),
        ("9007199254740993.0", .double(9_007_199_254_740_992)),
        (#""""#, .string("")),
        (#""abc""#, .string("abc")),
        (#""a\"b\\c\/d\b\f\n\r\t""#, .string("a\"b\\c/d\u{8}\u{c}\n\r\t")),
        (#""\u0041\u00e9\u20AC""#, .string("Aé€")),
        (#""\u0001""#, .string("\u{1}")),
        (#""\u0000x""#, .string("\u{0}x")),
        (#""\ud83d\ude00""#, .string("😀")),
        (#""\uD83D\uDE00 ok""#, .string("😀 ok")),
        (#""\udbff\udfff""#, .string("\u{10FFFF}")),
        (#""\u2028""#, .string("\u{2028}")),
        ("\"héllo 😀 日本\"", .string("héllo 😀 日本")),
        ("[]", .array([])),
        ("{}", .object([])),
        (
            "[1,2.5,\"x\",null,true,[],{}]",
            .array([.int(1), .double(2.5), .string("x"), .null, .bool(true), .array([]), .object([])])
        ),
        (" \t[ 1 , 2 ]\r\n", .array([.int(1), .int(2)])),
        ("{\"op\":\"add\",\"n\":1}", .object([("op", .string("add")), ("n", .int(1))])),
        ("{\"z\":1,\"a\":2}", .object([("z", .int(1)), ("a", .int(2))])),
        ("{ \"a\" : { \"b\" : [ null ] } }", .object([("a", .object([("b", .array([.null]))]))])),
        ("null\r", .null),
        ("{\"a\":1}\r", .object([("a", .int(1))])),
        ("  true  ", .bool(true)),
        ("{\"é\":1,\"e\\u0301\":2}", .object([("é", .int(1)), ("e\u{301}", .int(2))])),
        ("{\"abcdefghij\":1,\"abcdefghik\":2}", .object([("abcdefghij", .int(1)), ("abcdefghik", .int(2))])),
        ("{\"a\":1,\"\\u0062\":2,\"b\\n\":3}", .object([("a", .int(1)), ("b", .int(2)), ("b\n", .int(3))])),
    ]

    @Test(arguments: validDocuments)
    func parsesValidDocument(input: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(input) == expected)
        #expect(try JSONParser.parse(Array(input.utf8)) == expected)
        let viaBuffer = try Array(input.utf8).withUnsafeBytes { try JSONParser.parse($0) }
        #expect(viaBuffer == expected)
    }

    // MARK: - Invalid documents

    static let invalidDocuments: [BadDocument] = [
        BadDocument("", at: 0, "empty line"),
        BadDocument("   ", at: 0, "empty line"),
        BadDocument("\r", at: 0, "empty line"),
        BadDocument("NaN", at: 0, "unexpected character 'N'"),
        BadDocument("Infinity", at: 0, "unexpected character 'I'"),
        BadDocument("-Infinity", at: 0, "invalid number"),
        BadDocument("+1", at: 0, "unexpected character '+'"),
        BadDocument("01", at: 0, "invalid number"),
        BadDocument("-01", at: 0, "invalid number"),
        BadDocument("1.", at: 0, "invalid number"),
        BadDocument(".5", at: 0, "unexpected character '.'"),
        BadDocument("0x10", at: 0, "invalid number"),
        BadDocument("1e", at: 0, "invalid number"),
        BadDocument("1e+", at: 0, "invalid number"),
        BadDocument("-", at: 0, "invalid number"),
        BadDocument("--1", at: 0, "invalid number"),
        BadDocument("1.2.3", at: 0, "invalid number"),
        BadDocument("[1-2]", at: 1, "invalid number"),
        BadDocument("tru", at: 0, "invalid literal"),
        BadDocument("True", at: 0, "unexpected character 'T'"),
        BadDocument("nul", at: 0, "invalid literal"),
        BadDocument("nulll", at: 0, "invalid literal"),
        BadDocument("[true1]", at: 1, "invalid literal"),
        BadDocument("true false", at: 5, "trailing characters after value"),
        BadDocument("[1] x", at: 4, "trailing characters after value"),
        BadDocument("{} {}", at: 3, "trailing characters after value"),
        BadDocument("1 2", at: 2, "trailing characters after value"),
        BadDocument("null\u{0}", at: 4, "trailing characters after value"),
        BadDocument("[", at: 1, "unexpected end of input"),
        BadDocument("[1", at: 2, "unexpected end of input"),
        BadDocument("[1,", at: 3, "unexpected end of input"),
        BadDocument("{", at: 1, "unexpected end of input"),
        BadDocument("{\"a\"", at: 4, "unexpected end of input"),
        BadDocument("{\"a\":", at: 5, "unexpected end of input"),
        BadDocument("[1,]", at: 3, "unexpected character ']'"),
        BadDocument("[,1]", at: 1, "unexpected character ','"),
        BadDocument("[1 2]", at: 3, "expected ',' or ']'"),
        BadDocument("{\"a\" 1}", at: 5, "expected ':'"),
        BadDocument("{\"a\":1,}", at: 7, "expected a string key"),
        BadDocument("{\"a\":1 \"b\":2}", at: 7, "expected ',' or '}'"),
        BadDocument("{a:1}", at: 1, "expected a string key"),
        BadDocument("{1:1}", at: 1, "expected a string key"),
        BadDocument("'a'", at: 0, "unexpected character '''"),
        BadDocument("\"abc", at: 0, "unterminated string"),
        BadDocument("[\"abc\\", at: 1, "unterminated string"),
        BadDocument("\"a\tb\"", at: 2, "unescaped control character"),
        BadDocument("\"a\nb\"", at: 2, "unescaped control character"),
        BadDocument("\"\u{0}\"", at: 1, "unescaped control character"),
        BadDocument("\"\u{1f}\"", at: 1, "unescaped control character"),
        BadDocument(#""\x""#, at: 1, "invalid escape"),
        BadDocument(#""\U0041""#, at: 1, "invalid escape"),
        BadDocument(#""\'""#, at: 1, "invalid escape"),
        BadDocument(#""\u12""#, at: 1, "invalid \\u escape"),
        BadDocument(#""ab\u12G4""#, at: 3, "invalid \\u escape"),
        BadDocument(#""\u123"#, at: 1, "invalid \\u escape"),
        BadDocument("{\"op\":1,\"op\":2}", at: 8, "duplicate key \"op\""),
        BadDocument("{\"a\":1,\"b\":{\"x\":1,\"x\":[]}}", at: 18, "duplicate key \"x\""),
        BadDocument("{\"\\u00e9\":1,\"é\":2}", at: 12, "duplicate key"),
        BadDocument("{\"a\\/b\":1,\"a/b\":2}", at: 10, "duplicate key"),
        BadDocument("{\"abcdefghij\":1,\"abcdefghij\":2}", at: 16, "duplicate key \"abcdefghij\""),
        BadDocument("{\"b\":1,\"\\u0062\":2}", at: 7, "duplicate key \"b\""),
        BadDocument([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D], at: 1, "key is not valid Unicode"),
        BadDocument("{\"\\ud800\":1}", at: 1, "key is not valid Unicode"),
        BadDocument([0xEF, 0xBB, 0xBF, 0x31], at: 0, "unexpected byte 0xEF"),
        BadDocument([0xFF], at: 0, "unexpected byte 0xFF"),
        BadDocument("\u{b}1", at: 0, "unexpected byte 0x0B"),
    ]

    @Test(arguments: invalidDocuments)
    func rejectsInvalidDocument(bad: BadDocument) {
        let error = Self.parseError(bad.input)
        #expect(error?.offset == bad.offset)
        #expect(error?.message.contains(bad.message) == true, "\(String(describing: error))")
    }

    @Test func errorCarriesOffsetAndMessage() {
        #expect(throws: JSONParseError(offset: 8, message: "duplicate key \"op\"")) {
            try JSONParser.parse("{\"op\":1,\"op\":2}")
        }
    }

    // MARK: - Depth

    @Test(arguments: [(64, true), (65, false), (1, true), (200, false)])
    func nestingDepthOfArrays(depth: Int, accepted: Bool) throws {
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        try checkDepth(text, depth: depth, accepted: accepted)
    }

    @Test(arguments: [(64, true), (65, false)])
    func nestingDepthOfObjects(depth: Int, accepted: Bool) throws {
        let text = String(repeating: "{\"a\":", count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        try checkDepth(text, depth: depth, accepted: accepted)
    }

    @Test(arguments: [(64, true), (65, false)])
    func nestingDepthOfMixedContainers(depth: Int, accepted: Bool) throws {
        let opens = (0..<depth - 1).map { $0 % 2 == 0 ? "[" : "{\"k\":" }.joined()
        let closes = (0..<depth - 1).reversed().map { $0 % 2 == 0 ? "]" : "}" }.joined()
        try checkDepth(opens + "[]" + closes, depth: depth, accepted: accepted)
    }

    func checkDepth(_ text: String, depth: Int, accepted: Bool) throws {
        if accepted {
            var value = try JSONParser.parse(text)
            var levels = 0
            while true {
                levels += 1
                switch value {
                case .array(let items) where !items.isEmpty: value = items[0]
                case .object(let pairs) where !pairs.isEmpty: value = pairs[0].1
                default:
                    #expect(levels == depth)
                    return
                }
            }
        } else {
            let error = Self.parseError(text)
            #expect(error?.message == "nesting deeper than 64")
            // The error points at the opening bracket that is one level too deep.
            let bytes = Array(text.utf8)
            let openers = bytes.indices.filter { bytes[$0] == UInt8(ascii: "[") || bytes[$0] == UInt8(ascii: "{") }
            #expect(error?.offset == openers[JSONParser.maxDepth])
        }
    }

    // MARK: - Unicode

    static let invalidUTF8Bodies: [[UInt8]] = [
        [0xFF],
        [0xFE],
        [0x80],
        [0xBF],
        [0xC0, 0x80],
        [0xC1, 0xBF],
        [0xED, 0xA0, 0x80],
        [0xED, 0xBF, 0xBF],
        [0xE2, 0x82],
        [0xE0, 0x80, 0x80],
        [0xE0, 0x9F, 0xBF],
        [0xF0, 0x80, 0x80, 0x80],
        [0xF0, 0x8F, 0xBF, 0xBF],
        [0xF4, 0x90, 0x80, 0x80],
        [0xF5, 0x80, 0x80, 0x80],
        [0xF0, 0x9F, 0x98],
        [0xC3],
        [0xC3, 0x41],
        [0x61, 0x62, 0x63, 0xFF, 0x64],
        Array("abcdefghijklmnop".utf8) + [0xE2, 0x82],
        Array("é".utf8) + [0xA9],
        Array("\\n".utf8) + [0xFF] + Array("\\u0041".utf8),
        Array("\\ud83d\\ude00".utf8) + [0x80],
    ]

    @Test(arguments: invalidUTF8Bodies)
    func invalidUTF8BecomesInvalidString(body: [UInt8]) throws {
        #expect(try Self.parseBytes(Self.quoted(body)) == .invalidString(body))
        // The value is still delimited correctly, so the rest of the line parses.
        let inArray = [UInt8(ascii: "[")] + Self.quoted(body) + Array(",1]".utf8)
        #expect(try Self.parseBytes(inArray) == .array([.invalidString(body), .int(1)]))
    }

    static let validUTF8Bodies: [[UInt8]] = [
        [0xC2, 0x80],
        [0xDF, 0xBF],
        [0xE0, 0xA0, 0x80],
        [0xED, 0x9F, 0xBF],
        [0xEE, 0x80, 0x80],
        [0xEF, 0xBF, 0xBF],
        [0xF0, 0x90, 0x80, 0x80],
        [0xF4, 0x8F, 0xBF, 0xBF],
        Array("0123456789abcdefé".utf8),
    ]

    @Test(arguments: validUTF8Bodies)
    func validUTF8BoundariesAreStrings(body: [UInt8]) throws {
        #expect(try Self.parseBytes(Self.quoted(body)) == .string(String(decoding: body, as: UTF8.self)))
    }

    static let loneSurrogateBodies: [String] = [
        #"\ud800"#,
        #"\udc00"#,
        #"\uDBFF"#,
        #"\ud800x"#,
        #"a\ud800\u0041"#,
        #"\ud800\ud800"#,
        #"\ude00\ud83d"#,
        #"\ud800\n"#,
        #"ok\ud83d\ude00\ud83d"#,
    ]

    @Test(arguments: loneSurrogateBodies)
    func loneSurrogateEscapeBecomesInvalidString(body: String) throws {
        let raw = Array(body.utf8)
        #expect(try Self.parseBytes(Self.quoted(raw)) == .invalidString(raw))
    }

    // The string scanner works eight bytes at a time; put the interesting byte at every offset around a word.
    @Test(arguments: 0..<24)
    func specialByteAtEveryPosition(position: Int) throws {
        let length = 24
        func body(with special: [UInt8]) -> [UInt8] {
            Array(repeating: UInt8(ascii: "a"), count: position) + special
                + Array(repeating: UInt8(ascii: "b"), count: length - position)
        }
        let control = body(with: [0x01])
        #expect(Self.parseError(Self.quoted(control))?.offset == position + 1)
        let invalid = body(with: [0xFF])
        #expect(try Self.parseBytes(Self.quoted(invalid)) == .invalidString(invalid))
        let escaped = body(with: Array(#"\""#.utf8))
        let expected = String(repeating: "a", count: position) + "\"" + String(repeating: "b", count: length - position)
        #expect(try Self.parseBytes(Self.quoted(escaped)) == .string(expected))
        let accented = body(with: Array("é".utf8))
        #expect(try Self.parseBytes(Self.quoted(accented)) == .string(String(decoding: accented, as: UTF8.self)))
        // Truncated input: the closing quote must be found within the buffer, never past its end.
        let truncated = [UInt8(ascii: "\"")] + body(with: [])
        #expect(throws: JSONParseError(offset: 0, message: "unterminated string")) {
            try Self.parseBytes(truncated)
        }
    }

    @Test func doesNotReadPastTheBuffer() throws {
        let storage = Array("\"abcdefghijklmnopqrstuvwxyz\"".utf8)
        try storage.withUnsafeBytes { (all: UnsafeRawBufferPointer) throws in
            let head = UnsafeRawBufferPointer(rebasing: all[0..<storage.count - 1])
            #expect(throws: JSONParseError(offset: 0, message: "unterminated string")) {
                try JSONParser.parse(head)
            }
            #expect(try JSONParser.parse(all) == .string("abcdefghijklmnopqrstuvwxyz"))
            let number = UnsafeRawBufferPointer(rebasing: all[1..<1])
            #expect(throws: JSONParseError(offset: 0, message: "empty line")) {
                try JSONParser.parse(number)
            }
        }
    }

    /// Pieces repeated to build 2-MiB strings: ASCII, multi-byte UTF-8, and text needing escapes.
    static let bigStringPieces = ["a", "é€😀", "ab\"\\\n\u{1}"]

    @Test(arguments: bigStringPieces)
    func twoMebibyteStringParses(piece: String) throws {
        let content = String(repeating: piece, count: (2 << 20) / piece.utf8.count + 1)
        var writer = JSONWriter()
        writer.writeString(content)
        #expect(writer.bytes.count >= 2 << 20)
        #expect(try JSONParser.parse(writer.bytes) == .string(content))
    }

    // MARK: - Objects and values

    @Test func manyKeysUseTheHashedDuplicateCheck() throws {
        let keys = (0..<40).map { "k\($0)" }
        let body = keys.map { "\"\($0)\":1" }.joined(separator: ",")
        guard case .object(let pairs) = try JSONParser.parse("{" + body + "}") else {
            Issue.record("not an object")
            return
        }
        #expect(pairs.map(\.0) == keys)
        #expect(Self.parseError("{" + body + ",\"k31\":2}")?.message == "duplicate key \"k31\"")
    }

    // Containers are staged in a fixed-size buffer and spill into a growing array past 16 elements.
    @Test(arguments: [0, 1, 15, 16, 17, 40, 1000])
    func containersOfAnySize(size: Int) throws {
        let items = (0..<size).map { JSONValue.int(Int64($0)) }
        let pairs = (0..<size).map { ("key\($0)", JSONValue.array(Array(items.prefix($0 % 20)))) }
        let value = JSONValue.array([.object(pairs), .array(items)])
        #expect(try JSONParser.parse(Self.written(value)) == value)
        let escapedKeys = "{" + (0..<size).map { "\"\\u006b\($0)\":\($0)" }.joined(separator: ",") + "}"
        #expect(try JSONParser.parse(escapedKeys) == .object((0..<size).map { ("k\($0)", .int(Int64($0))) }))
    }

    // An error part-way through a staged container must unwind cleanly (no leak or double free under ASan).
    @Test(arguments: [1, 5, 16, 17, 30])
    func errorsInsidePartlyBuiltContainers(size: Int) {
        let items = (0..<size).map { "\"item number \($0) with a long text\"" }.joined(separator: ",")
        #expect(Self.parseError("[" + items + ",x]")?.message.contains("unexpected character 'x'") == true)
        let members = (0..<size).map { "\"key \($0) long enough to be heap\":[\"v\($0)\"]" }.joined(separator: ",")
        let duplicated = "{" + members + ",\"key 0 long enough to be heap\":1}"
        #expect(Self.parseError(duplicated)?.message.contains("duplicate") == true)
        #expect(Self.parseError("{" + members + "}}")?.message == "trailing characters after value")
        #expect(Self.parseError("{\"a\":[" + items + "],\"b\":{" + members + ",}}")?.message.contains("key") == true)
    }

    @Test func subscriptFindsKeysOfObjectsOnly() throws {
        let value = try JSONParser.parse(#"{"op":"add","n":2,"é":true}"#)
        #expect(value["op"] == .string("add"))
        #expect(value["n"] == .int(2))
        #expect(value["é"] == .bool(true))
        #expect(value["e\u{301}"] == nil)
        #expect(value["missing"] == nil)
        #expect(JSONValue.array([.int(1)])["op"] == nil)
        #expect(JSONValue.string("op")["op"] == nil)
    }

    @Test(arguments: [
        (
            JSONValue.object([("a", .int(1)), ("b", .int(2))]), JSONValue.object([("a", .int(1)), ("b", .int(2))]), true
        ),
        (.object([("a", .int(1)), ("b", .int(2))]), .object([("b", .int(2)), ("a", .int(1))]), false),
        (.object([("a", .int(1))]), .object([("a", .int(2))]), false),
        (.object([("a", .int(1))]), .object([("a", .int(1)), ("b", .null)]), false),
        (.int(1), .double(1), false),
        (.string("é"), .string("e\u{301}"), false),
        (.object([("é", .null)]), .object([("e\u{301}", .null)]), false),
        (.invalidString([0xFF]), .invalidString([0xFF]), true),
        (.invalidString([0xFF]), .string("\u{FFFD}"), false),
        (.array([.null, .bool(false)]), .array([.null, .bool(false)]), true),
        (.array([.null]), .array([.null, .null]), false),
    ])
    func equalityIsExact(lhs: JSONValue, rhs: JSONValue, equal: Bool) {
        #expect((lhs == rhs) == equal)
        #expect((rhs == lhs) == equal)
    }

    // Decimal tokens against the standard library (Int64(String) / Double(String)) as the oracle.
    @Test func numbersMatchTheStandardLibrary() throws {
        var rng = SplitMix64(state: 0x5EED_0001)
        func digits(_ count: Int, leadingNonZero: Bool) -> String {
            var text = ""
            for k in 0..<count {
                let low = leadingNonZero && k == 0 ? 1 : 0
                text.append(Character(UnicodeScalar(UInt8(ascii: "0") + UInt8(low + rng.below(10 - low)))))
            }
            return text
        }
        for _ in 0..<5000 {
            var token = rng.below(2) == 0 ? "-" : ""
            let integerDigits = rng.below(5) == 0 ? 1 : 1 + rng.below(24)
            token += integerDigits == 1 && rng.below(3) == 0 ? "0" : digits(integerDigits, leadingNonZero: true)
            let hasFraction = rng.below(2) == 0
            if hasFraction {
                token += "." + digits(1 + rng.below(24), leadingNonZero: false)
            }
            let hasExponent = rng.below(3) == 0
            if hasExponent {
                token += ["e", "E", "e+", "e-", "E-"][rng.below(5)] + String(rng.below(rng.below(2) == 0 ? 30 : 400))
            }
            let parsed = try JSONParser.parse(token)
            if !hasFraction && !hasExponent, let exact = Int64(token) {
                #expect(parsed == .int(exact), "\(token)")
            } else {
                let expected = Double(token)!
                guard case .double(let actual) = parsed, actual.bitPattern == expected.bitPattern else {
                    Issue.record("\(token): got \(parsed), expected \(expected)")
                    continue
                }
            }
        }
    }

    @Test func doublesRoundTripThroughTheirDescription() throws {
        var rng = SplitMix64(state: 0x5EED_0002)
        for _ in 0..<5000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            let text = value.description
            let parsed = try JSONParser.parse(text)
            guard case .double(let back) = parsed, back.bitPattern == value.bitPattern else {
                Issue.record("\(text) parsed as \(parsed)")
                continue
            }
        }
    }

    // MARK: - Writer

    static let escapingTable: [(String, String)] = [
        ("", #""""#),
        ("plain", #""plain""#),
        ("a\"b", #""a\"b""#),
        ("back\\slash", #""back\\slash""#),
        ("/", #""/""#),
        ("\n\r\t\u{8}\u{c}", #""\n\r\t\b\f""#),
        ("\u{0}", #""\u0000""#),
        ("\u{1}x\u{1f}", #""\u0001x\u001f""#),
        ("\u{7f}", "\"\u{7f}\""),
        ("é€😀", "\"é€😀\""),
        ("a\u{2028}b\u{2029}c", #""a\u2028b\u2029c""#),
        ("\u{2027}\u{202A}", "\"\u{2027}\u{202A}\""),
        ("0123456789abcdef\u{2028}", #""0123456789abcdef\u2028""#),
        ("0123456789abcdef\"", #""0123456789abcdef\"""#),
        ("long clean text spanning several words\n", #""long clean text spanning several words\n""#),
    ]

    @Test(arguments: escapingTable)
    func writerEscapes(input: String, expected: String) throws {
        var writer = JSONWriter()
        writer.writeString(input)
        #expect(writer.string == expected)
        #expect(try JSONParser.parse(writer.bytes) == .string(input))
    }

    @Test(arguments: [
        (Int64.min, "-9223372036854775808"),
        (Int64.max, "9223372036854775807"),
        (0, "0"),
        (-1, "-1"),
        (9, "9"),
        (10, "10"),
        (-10, "-10"),
        (1_000_000_007, "1000000007"),
    ])
    func writeIntIsDecimal(value: Int64, expected: String) throws {
        var writer = JSONWriter()
        writer.writeInt(value)
        #expect(writer.string == expected)
        #expect(try JSONParser.parse(writer.bytes) == .int(value))
    }

    @Test(arguments: [
        (1.0, "1.0"),
        (-2.0, "-2.0"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1e16, "1e+16"),
        (9_007_199_254_740_991, "9007199254740991.0"),
        (.leastNonzeroMagnitude, "5e-324"),
        (.infinity, "null"),
        (-.infinity, "null"),
        (.nan, "null"),
    ])
    func writeDoubleIsShortest(value: Double, expected: String) {
        var writer = JSONWriter()
        writer.writeDouble(value)
        #expect(writer.string == expected)
    }

    @Test func writeDoubleMatchesDescription() {
        var rng = SplitMix64(state: 0x5EED_0003)
        for round in 0..<4000 {
            let value: Double
            switch round % 3 {
            case 0: value = Double(bitPattern: rng.next())
            case 1: value = Double(Int64(bitPattern: rng.next()) >> rng.below(64))
            default: value = Double(rng.below(2_000_001) - 1_000_000) / 8
            }
            guard value.isFinite else { continue }
            var writer = JSONWriter()
            writer.writeDouble(value)
            #expect(writer.string == value.description)
        }
    }

    static let invalidStringTable: [([UInt8], String)] = [
        ([0xFF], "\u{FFFD}"),
        ([0x61, 0xC0, 0x80, 0x62], "a\u{FFFD}\u{FFFD}b"),
        ([0xE2, 0x82], "\u{FFFD}"),
        ([0xED, 0xA0, 0x80], "\u{FFFD}\u{FFFD}\u{FFFD}"),
        (Array(#"\ud800"#.utf8), "\u{FFFD}"),
        (Array(#"\ud800\u0041"#.utf8), "\u{FFFD}A"),
        (Array(#"\ude00\ud83d\ude00"#.utf8), "\u{FFFD}😀"),
        (Array(#"tab\tq\"\ud800"#.utf8), "tab\tq\"\u{FFFD}"),
        (Array(#"\n"#.utf8) + [0xFF], "\n\u{FFFD}"),
        (Array(#"bad \x and \u12 \"#.utf8), #"bad \x and \u12 \"#),
        ([0x01, 0x22], "\u{1}\""),
    ]

    @Test(arguments: invalidStringTable)
    func writeInvalidStringRepairs(raw: [UInt8], expected: String) throws {
        var writer = JSONWriter()
        writer.writeInvalidString(raw)
        #expect(String(validating: writer.bytes, as: UTF8.self) != nil)
        #expect(try JSONParser.parse(writer.bytes) == .string(expected))
        #expect(JSONValue.invalidString(raw).jsonString == writer.string)
    }

    @Test func invalidStringsFromTheParserWriteAsRepairedStrings() throws {
        for body in Self.invalidUTF8Bodies + Self.loneSurrogateBodies.map({ Array($0.utf8) }) {
            let parsed = try Self.parseBytes(Self.quoted(body))
            let reparsed = try JSONParser.parse(Self.written(parsed))
            guard case .string = reparsed else {
                Issue.record("\(body) rewrote as \(reparsed)")
                continue
            }
        }
    }

    @Test func writeRawAndStructure() {
        var writer = JSONWriter()
        writer.writeRaw("{\"kind\":")
        writer.writeString("add")
        writer.writeRaw(",\"n\":")
        writer.writeInt(-5)
        writer.writeRaw(",\"v\":")
        writer.write(.array([.null, .bool(true), .bool(false), .double(0.5), .object([("k", .string("x"))])]))
        writer.writeRaw("}")
        #expect(writer.string == #"{"kind":"add","n":-5,"v":[null,true,false,0.5,{"k":"x"}]}"#)
        #expect(JSONValue.object([("b", .int(1)), ("a", .int(2))]).jsonString == #"{"b":1,"a":2}"#)
    }

    static let roundTripValues: [JSONValue] = [
        .null,
        .bool(true),
        .int(Int64.min),
        .int(Int64.max),
        .double(-0.0),
        .double(1e300),
        .double(.leastNonzeroMagnitude),
        .double(123.0),
        .string("line\nbreak \"quoted\" \u{2028} 😀 \u{0}"),
        .array([]),
        .object([]),
        .object([("z", .array([.int(1), .object([("é", .null), ("e\u{301}", .null)])])), ("a", .string(""))]),
    ]

    @Test(arguments: roundTripValues)
    func fixedValuesRoundTrip(value: JSONValue) throws {
        let text = Self.written(value)
        let back = try JSONParser.parse(text)
        #expect(back == value)
        #expect(Self.written(back) == text)
    }

    @Test func randomValuesRoundTrip() throws {
        var rng = SplitMix64(state: 0x5EED_0004)
        for _ in 0..<500 {
            let value = Self.randomValue(&rng, depth: 0)
            let text = Self.written(value)
            let back = try JSONParser.parse(text)
            #expect(back == value, "\(value.jsonString)")
            #expect(Self.written(back) == text)
        }
    }

    // Corrupted documents must either parse or throw with an offset inside the line; never crash or misread.
    @Test func randomCorruptionsParseOrThrowCleanly() throws {
        var rng = SplitMix64(state: 0x5EED_0005)
        let interesting: [UInt8] = Array(#"{}[]",:\/u0019eE+-. tfn"#.utf8) + [0x00, 0x0A, 0x0D, 0x80, 0xC3, 0xED, 0xFF]
        for _ in 0..<3000 {
            var bytes = Self.written(Self.randomValue(&rng, depth: 0))
            for _ in 0..<1 + rng.below(3) {
                let position = rng.below(bytes.count + 1)
                switch rng.below(3) {
                case 0 where position < bytes.count: bytes.remove(at: position)
                case 1 where position < bytes.count: bytes[position] = interesting[rng.below(interesting.count)]
                default: bytes.insert(interesting[rng.below(interesting.count)], at: position)
                }
            }
            do {
                let value = try JSONParser.parse(bytes)
                let rewritten = try JSONParser.parse(Self.written(value))
                #expect(rewritten == value || Self.isLossy(value), "\(Self.written(value))")
            } catch {
                #expect(error.offset >= 0 && error.offset <= bytes.count)
            }
        }
    }

    /// Values the writer changes on purpose: invalid strings are repaired and infinities become null.
    static func isLossy(_ value: JSONValue) -> Bool {
        switch value {
        case .invalidString: true
        case .double(let number): !number.isFinite
        case .array(let items): items.contains(where: isLossy)
        case .object(let pairs): pairs.contains { isLossy($0.1) }
        default: false
        }
    }

    static let scalarPool: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{1}", "\n", "\r", "\t", "\u{8}", "\u{c}", "\u{1f}", "\u{7f}",
        "\u{80}", "é", "\u{301}", "\u{7ff}", "\u{800}", "€", "\u{2028}", "\u{2029}", "\u{d7ff}", "\u{e000}",
        "\u{fffd}", "\u{ffff}", "😀", "\u{10ffff}",
    ]

    static func randomString(_ rng: inout SplitMix64) -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<rng.below(rng.below(4) == 0 ? 40 : 10) {
            scalars.append(scalarPool[rng.below(scalarPool.count)])
        }
        return String(scalars)
    }

    static func randomValue(_ rng: inout SplitMix64, depth: Int) -> JSONValue {
        switch rng.below(depth < 4 ? 8 : 6) {
        case 0:
            return .null
        case 1:
            return .bool(rng.below(2) == 0)
        case 2:
            return .int(Int64(bitPattern: rng.next()) >> rng.below(64))
        case 3:
            var value = Double(bitPattern: rng.next())
            if !value.isFinite { value = 0.25 }
            return .double(rng.below(3) == 0 ? Double(rng.below(1000)) : value)
        case 4, 5:
            return .string(randomString(&rng))
        case 6:
            return .array((0..<rng.below(6)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var pairs: [(String, JSONValue)] = []
            for _ in 0..<rng.below(6) {
                let key = randomString(&rng)
                if pairs.contains(where: { JSONValue.sameUTF8($0.0, key) }) { continue }
                pairs.append((key, randomValue(&rng, depth: depth + 1)))
            }
            return .object(pairs)
        }
    }
}
