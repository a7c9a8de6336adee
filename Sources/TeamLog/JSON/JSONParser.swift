/// A JSON syntax error: where in the line it is and what is wrong.
public struct JSONParseError: Error, Equatable, Sendable {
    /// Byte offset of the problem within the line (for an unterminated string: its opening quote).
    public var offset: Int
    /// Human text, e.g. "unexpected character 'x'" or "unterminated string".
    public var message: String

    /// Creates an error at a byte offset.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }
}

/// Strict RFC 8259 parser for one JSON value per line, working on raw bytes without Foundation.
public enum JSONParser {
    /// Maximum nesting depth of arrays/objects; deeper input is an error (protects the stack).
    public static let maxDepth = 64

    /// Parses exactly one JSON value from the bytes (surrounding ASCII whitespace allowed; a trailing \r allowed).
    /// Anything else after the value is an error.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        guard let base = bytes.baseAddress else {
            throw JSONParseError(offset: 0, message: "empty line")
        }
        var reader = Reader(base: base, count: bytes.count)
        reader.skipWhitespace()
        guard reader.index < reader.count else {
            throw JSONParseError(offset: 0, message: "empty line")
        }
        let value = try reader.parseValue(depth: 0)
        reader.skipWhitespace()
        guard reader.index == reader.count else {
            throw JSONParseError(offset: reader.index, message: "trailing characters after value")
        }
        return value
    }

    /// Parses exactly one JSON value from a byte array (same rules as the buffer overload).
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        // `withUnsafeBytes` is `rethrows`, which erases typed throws; carry the error out in a Result.
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) -> JSONValue in try parse(raw) }
        }
        return try result.get()
    }

    /// Parses exactly one JSON value from the UTF-8 of a string (same rules as the buffer overload).
    public static func parse(_ string: String) throws(JSONParseError) -> JSONValue {
        var string = string
        let result = string.withUTF8 { utf8 in
            Result { () throws(JSONParseError) -> JSONValue in try parse(UnsafeRawBufferPointer(utf8)) }
        }
        return try result.get()
    }
}

// MARK: - Reader

extension JSONParser {
    /// Cursor over one line. A struct with an index (rather than slices) keeps the hot loops free of ARC traffic.
    struct Reader {
        let base: UnsafeRawPointer
        let count: Int
        var index = 0
        /// Reused for decoding escaped strings so a line with many escapes allocates one buffer, not one per string.
        var scratch: [UInt8] = []

        init(base: UnsafeRawPointer, count: Int) {
            self.base = base
            self.count = count
        }

        @inline(__always)
        func byte(_ offset: Int) -> UInt8 {
            base.load(fromByteOffset: offset, as: UInt8.self)
        }

        mutating func skipWhitespace() {
            while index < count {
                switch byte(index) {
                case 0x20, 0x0A, 0x0D, 0x09:
                    index += 1
                default:
                    return
                }
            }
        }

        func endOfInput() -> JSONParseError {
            JSONParseError(offset: index, message: "unexpected end of input")
        }

        func unexpected(at offset: Int, expecting: String? = nil) -> JSONParseError {
            var message = "unexpected " + JSONParser.describe(byte(offset))
            if let expecting {
                message += ", expected " + expecting
            }
            return JSONParseError(offset: offset, message: message)
        }

        /// Parses the value starting at `index` (which must not be whitespace); `depth` counts enclosing containers.
        mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
            guard index < count else { throw endOfInput() }
            switch byte(index) {
            case UInt8(ascii: "\""):
                return try parseString()
            case UInt8(ascii: "{"):
                return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["):
                return try parseArray(depth: depth + 1)
            case UInt8(ascii: "t"):
                try parseLiteral("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try parseLiteral("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try parseLiteral("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return try parseNumber()
            default:
                throw unexpected(at: index)
            }
        }

        mutating func parseLiteral(_ literal: StaticString) throws(JSONParseError) {
            let start = index
            let length = literal.utf8CodeUnitCount
            let matches =
                start + length <= count
                && literal.withUTF8Buffer { expected in
                    for k in 0..<length where byte(start + k) != expected[k] {
                        return false
                    }
                    return true
                }
            // "truex" is one bad token, not `true` followed by junk.
            guard matches, start + length == count || !JSONParser.isWordByte(byte(start + length)) else {
                throw JSONParseError(offset: start, message: "invalid literal")
            }
            index = start + length
        }

        // MARK: Containers

        /// Elements staged on the stack per container before the result array is made. Building the array once at
        /// its exact size avoids a chain of regrowths (1, 2, 4, 8, 16...) for typical small containers; bigger ones
        /// spill into an ordinary growing array.
        static let stagingCapacity = 16

        mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= JSONParser.maxDepth else {
                throw JSONParseError(offset: index, message: "nesting deeper than \(JSONParser.maxDepth)")
            }
            index += 1
            skipWhitespace()
            guard index < count else { throw endOfInput() }
            if byte(index) == UInt8(ascii: "]") {
                index += 1
                return .array([])
            }
            return try withUnsafeTemporaryAllocation(of: JSONValue.self, capacity: Reader.stagingCapacity) {
                (staging) throws(JSONParseError) -> JSONValue in
                try parseElements(depth: depth, staging: staging)
            }
        }

        mutating func parseElements(
            depth: Int,
            staging: UnsafeMutableBufferPointer<JSONValue>
        ) throws(JSONParseError) -> JSONValue {
            var filled = 0
            var spill: [JSONValue] = []
            defer { staging.baseAddress!.deinitialize(count: filled) }
            while true {
                skipWhitespace()
                let item = try parseValue(depth: depth)
                if spill.isEmpty && filled < staging.count {
                    (staging.baseAddress! + filled).initialize(to: item)
                    filled += 1
                } else {
                    if spill.isEmpty {
                        spill = JSONParser.moveOut(staging, count: filled, capacity: 4 * filled)
                        filled = 0
                    }
                    spill.append(item)
                }
                skipWhitespace()
                guard index < count else { throw endOfInput() }
                switch byte(index) {
                case UInt8(ascii: ","):
                    index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    if !spill.isEmpty { return .array(spill) }
                    let items = JSONParser.moveOut(staging, count: filled, capacity: filled)
                    filled = 0
                    return .array(items)
                default:
                    throw unexpected(at: index, expecting: "',' or ']'")
                }
            }
        }

        mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= JSONParser.maxDepth else {
                throw JSONParseError(offset: index, message: "nesting deeper than \(JSONParser.maxDepth)")
            }
            index += 1
            skipWhitespace()
            guard index < count else { throw endOfInput() }
            if byte(index) == UInt8(ascii: "}") {
                index += 1
                return .object([])
            }
            return try withUnsafeTemporaryAllocation(of: (String, JSONValue).self, capacity: Reader.stagingCapacity) {
                (staging) throws(JSONParseError) -> JSONValue in
                try withUnsafeTemporaryAllocation(of: StringSpan.self, capacity: Reader.stagingCapacity) {
                    (spans) throws(JSONParseError) -> JSONValue in
                    try parseMembers(depth: depth, staging: staging, spans: spans)
                }
            }
        }

        mutating func parseMembers(
            depth: Int,
            staging: UnsafeMutableBufferPointer<(String, JSONValue)>,
            spans: UnsafeMutableBufferPointer<StringSpan>
        ) throws(JSONParseError) -> JSONValue {
            var filled = 0
            var spill: [(String, JSONValue)] = []
            // Small objects find duplicates by comparing raw key bytes in place; once there are many keys a hash set
            // takes over, so a hostile line with thousands of keys stays linear.
            var seen: Set<UTF8Key>? = nil
            defer { staging.baseAddress!.deinitialize(count: filled) }
            while true {
                skipWhitespace()
                guard index < count else { throw endOfInput() }
                guard byte(index) == UInt8(ascii: "\"") else {
                    throw unexpected(at: index, expecting: "a string key")
                }
                let keyOffset = index
                let span = try scanString()
                guard case .string(let key) = makeString(span) else {
                    throw JSONParseError(offset: keyOffset, message: "key is not valid Unicode")
                }
                let duplicate: Bool
                if seen == nil && spill.isEmpty && filled < spans.count {
                    duplicate = isDuplicate(key, span, among: staging, spans: spans, count: filled)
                } else {
                    if seen == nil {
                        let keys = spill.isEmpty ? staging[..<filled].map(\.0) : spill.map(\.0)
                        seen = Set(keys.map(UTF8Key.init(string:)))
                    }
                    duplicate = !seen!.insert(UTF8Key(string: key)).inserted
                }
                if duplicate {
                    throw JSONParseError(offset: keyOffset, message: "duplicate key \"\(key)\"")
                }
                skipWhitespace()
                guard index < count else { throw endOfInput() }
                guard byte(index) == UInt8(ascii: ":") else {
                    throw unexpected(at: index, expecting: "':'")
                }
                index += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                if spill.isEmpty && filled < staging.count {
                    (staging.baseAddress! + filled).initialize(to: (key, value))
                    spans[filled] = span
                    filled += 1
                } else {
                    if spill.isEmpty {
                        spill = JSONParser.moveOut(staging, count: filled, capacity: 4 * filled)
                        filled = 0
                    }
                    spill.append((key, value))
                }
                skipWhitespace()
                guard index < count else { throw endOfInput() }
                switch byte(index) {
                case UInt8(ascii: ","):
                    index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    if !spill.isEmpty { return .object(spill) }
                    let pairs = JSONParser.moveOut(staging, count: filled, capacity: filled)
                    filled = 0
                    return .object(pairs)
                default:
                    throw unexpected(at: index, expecting: "',' or '}'")
                }
            }
        }

        /// Whether `key` (scanned as `span`) equals one of the first `count` staged keys of the same object.
        func isDuplicate(
            _ key: String,
            _ span: StringSpan,
            among earlier: UnsafeMutableBufferPointer<(String, JSONValue)>,
            spans: UnsafeMutableBufferPointer<StringSpan>,
            count: Int
        ) -> Bool {
            for k in 0..<count {
                let other = spans[k]
                if !span.hasEscape && !other.hasEscape {
                    // Without escapes the raw bytes are the decoded bytes, so compare them in the input.
                    if other.length == span.length && sameBytes(other.start, span.start, span.length) {
                        return true
                    }
                } else if JSONValue.sameUTF8(earlier[k].0, key) {
                    return true
                }
            }
            return false
        }

        @inline(__always)
        func sameBytes(_ a: Int, _ b: Int, _ length: Int) -> Bool {
            var k = 0
            while k + 8 <= length {
                if base.loadUnaligned(fromByteOffset: a + k, as: UInt64.self)
                    != base.loadUnaligned(fromByteOffset: b + k, as: UInt64.self)
                {
                    return false
                }
                k += 8
            }
            while k < length {
                if byte(a + k) != byte(b + k) { return false }
                k += 1
            }
            return true
        }

        // MARK: Strings

        /// Where a string's body lies in the input and what the scan learned about it.
        struct StringSpan {
            var start: Int
            var length: Int
            var hasEscape: Bool
            var nonASCII: Bool
        }

        /// Parses a string at `index` (the opening quote). Syntax errors throw; bad Unicode yields `.invalidString`.
        mutating func parseString() throws(JSONParseError) -> JSONValue {
            let span = try scanString()
            return makeString(span)
        }

        /// Finds the end of the string at `index` (its opening quote), checking syntax, and moves past it.
        mutating func scanString() throws(JSONParseError) -> StringSpan {
            let quote = index
            let start = quote + 1
            var i = start
            var hasEscape = false
            var nonASCII = false
            scan: while true {
                // Eight bytes at a time: skip words with no quote, backslash or control byte (non-ASCII is noted),
                // and jump straight to the first such byte when there is one.
                while i + 8 <= count {
                    let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                    let hits = JSONParser.specialBytes(word)
                    if hits != 0 {
                        // Little-endian: the lowest flagged byte comes first in memory and is always a true hit.
                        let before = hits.trailingZeroBitCount & ~7
                        if word & ((1 << before) &- 1) & 0x8080_8080_8080_8080 != 0 { nonASCII = true }
                        i += before >> 3
                        break
                    }
                    if word & 0x8080_8080_8080_8080 != 0 { nonASCII = true }
                    i += 8
                }
                guard i < count else {
                    throw JSONParseError(offset: quote, message: "unterminated string")
                }
                let b = byte(i)
                switch b {
                case UInt8(ascii: "\""):
                    break scan
                case UInt8(ascii: "\\"):
                    hasEscape = true
                    i = try validateEscape(at: i, quote: quote)
                case 0..<0x20:
                    throw JSONParseError(offset: i, message: "unescaped control character in string")
                case 0x80...:
                    nonASCII = true
                    i += 1
                default:
                    i += 1
                }
            }
            index = i + 1
            return StringSpan(start: start, length: i - start, hasEscape: hasEscape, nonASCII: nonASCII)
        }

        /// Decodes a scanned string body into `.string`, or `.invalidString` when it is not valid Unicode.
        mutating func makeString(_ span: StringSpan) -> JSONValue {
            let raw = UnsafeRawBufferPointer(start: base + span.start, count: span.length)
            if span.nonASCII && !JSONParser.isValidUTF8(raw) {
                return .invalidString(Array(raw))
            }
            if !span.hasEscape {
                return .string(String(decoding: raw, as: UTF8.self))
            }
            scratch.removeAll(keepingCapacity: true)
            guard JSONParser.decodeEscapes(raw, into: &scratch, repair: false) else {
                return .invalidString(Array(raw))
            }
            return .string(String(decoding: scratch, as: UTF8.self))
        }

        /// Checks the escape whose backslash is at `offset` and returns the offset just past it.
        func validateEscape(at offset: Int, quote: Int) throws(JSONParseError) -> Int {
            guard offset + 1 < count else {
                throw JSONParseError(offset: quote, message: "unterminated string")
            }
            switch byte(offset + 1) {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                return offset + 2
            case UInt8(ascii: "u"):
                guard offset + 6 <= count,
                    JSONParser.hex4(UnsafeRawBufferPointer(start: base, count: count), at: offset + 2) >= 0
                else {
                    throw JSONParseError(offset: offset, message: "invalid \\u escape")
                }
                return offset + 6
            default:
                throw JSONParseError(offset: offset, message: "invalid escape")
            }
        }

        // MARK: Numbers

        mutating func parseNumber() throws(JSONParseError) -> JSONValue {
            let start = index
            var i = index
            let negative = byte(i) == UInt8(ascii: "-")
            if negative { i += 1 }
            guard i < count, JSONParser.isDigit(byte(i)) else {
                throw JSONParseError(offset: start, message: "invalid number")
            }
            // Decimal significand accumulated across integer and fraction digits, for the exact fast path.
            var significand: UInt64 = 0
            var overflow = false
            var isInteger = true
            var exponent = 0
            if byte(i) == UInt8(ascii: "0") {
                i += 1
                if i < count && JSONParser.isDigit(byte(i)) {
                    throw JSONParseError(offset: start, message: "invalid number")
                }
            } else {
                while i < count, JSONParser.isDigit(byte(i)) {
                    JSONParser.accumulate(byte(i), into: &significand, overflow: &overflow)
                    i += 1
                }
            }
            if i < count && byte(i) == UInt8(ascii: ".") {
                isInteger = false
                i += 1
                guard i < count, JSONParser.isDigit(byte(i)) else {
                    throw JSONParseError(offset: start, message: "invalid number")
                }
                while i < count, JSONParser.isDigit(byte(i)) {
                    JSONParser.accumulate(byte(i), into: &significand, overflow: &overflow)
                    exponent -= 1
                    i += 1
                }
            }
            if i < count && (byte(i) | 0x20) == UInt8(ascii: "e") {
                isInteger = false
                i += 1
                var exponentNegative = false
                if i < count && (byte(i) == UInt8(ascii: "+") || byte(i) == UInt8(ascii: "-")) {
                    exponentNegative = byte(i) == UInt8(ascii: "-")
                    i += 1
                }
                guard i < count, JSONParser.isDigit(byte(i)) else {
                    throw JSONParseError(offset: start, message: "invalid number")
                }
                var written = 0
                while i < count, JSONParser.isDigit(byte(i)) {
                    // Clamped: anything this large is 0 or infinity anyway, and the slow path gets the exact text.
                    if written < 100_000 { written = written * 10 + Int(byte(i) &- UInt8(ascii: "0")) }
                    i += 1
                }
                exponent += exponentNegative ? -written : written
            }
            // "1.2.3", "0x10", "1-2": one malformed token rather than a number followed by junk.
            if i < count {
                let next = byte(i)
                if JSONParser.isWordByte(next) || next == UInt8(ascii: ".") || next == UInt8(ascii: "+")
                    || next == UInt8(ascii: "-")
                {
                    throw JSONParseError(offset: start, message: "invalid number")
                }
            }
            index = i
            if isInteger && !overflow {
                if !negative && significand <= UInt64(Int64.max) {
                    return .int(Int64(significand))
                }
                if negative && significand <= Int64.min.magnitude {
                    return .int(Int64(truncatingIfNeeded: 0 &- significand))
                }
            }
            // Clinger's fast path: both operands exact, so one IEEE multiply/divide is correctly rounded.
            if !overflow && significand <= 1 << 53 && exponent >= -22 && exponent <= 22 {
                var value = Double(significand)
                value =
                    exponent < 0
                    ? value / JSONParser.powersOfTen[-exponent]
                    : value * JSONParser.powersOfTen[exponent]
                return .double(negative ? -value : value)
            }
            let text = String(decoding: UnsafeRawBufferPointer(start: base + start, count: i - start), as: UTF8.self)
            guard let value = Double(text) else {
                // Unreachable for grammar-checked tokens; kept as an error rather than a crash.
                throw JSONParseError(offset: start, message: "invalid number")
            }
            return .double(value)
        }
    }
}

// MARK: - Byte helpers

extension JSONParser {
    /// Hashes and compares a key by its UTF-8 bytes, matching `JSONValue.sameUTF8`.
    struct UTF8Key: Hashable {
        let string: String

        func hash(into hasher: inout Hasher) {
            for byte in string.utf8 {
                hasher.combine(byte)
            }
        }

        static func == (lhs: UTF8Key, rhs: UTF8Key) -> Bool {
            JSONValue.sameUTF8(lhs.string, rhs.string)
        }
    }

    /// Moves the first `count` staged elements into a new array (leaving that memory uninitialized).
    static func moveOut<Element>(
        _ staging: UnsafeMutableBufferPointer<Element>,
        count: Int,
        capacity: Int
    ) -> [Element] {
        // Appending moved elements (rather than `init(unsafeUninitializedCapacity:)`) stays on the specialized
        // array paths; the unsafe initializer looks up generic metadata at runtime on every call.
        var result: [Element] = []
        result.reserveCapacity(capacity)
        for offset in 0..<count {
            result.append((staging.baseAddress! + offset).move())
        }
        return result
    }

    /// Exact powers of ten for the number fast path (10^22 is the largest exactly representable one).
    static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ]

    @inline(__always)
    static func isDigit(_ b: UInt8) -> Bool {
        b &- UInt8(ascii: "0") < 10
    }

    /// Letters and digits: bytes that would glue onto a literal or number and make it one bad token.
    @inline(__always)
    static func isWordByte(_ b: UInt8) -> Bool {
        isDigit(b) || (b | 0x20) &- UInt8(ascii: "a") < 26
    }

    @inline(__always)
    static func accumulate(_ digit: UInt8, into value: inout UInt64, overflow: inout Bool) {
        let (times10, o1) = value.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(UInt64(digit &- UInt8(ascii: "0")))
        if o1 || o2 {
            overflow = true
        } else {
            value = sum
        }
    }

    /// Flags (bit 7 of a byte) the bytes of a little-endian word that are '"', '\\' or below 0x20, using the
    /// "has zero byte" bit trick. A borrow can only flag extra bytes above (after) a real hit, so a zero result is
    /// exact and the lowest flag is always a real hit.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hits = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
        return hits & 0x8080_8080_8080_8080
    }

    /// True when some byte of the word is '"', '\\' or below 0x20.
    @inline(__always)
    static func hasSpecialByte(_ word: UInt64) -> Bool {
        specialBytes(word) != 0
    }

    /// Value of four hex digits at `offset`, or -1 if they are missing or not hex.
    static func hex4(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int {
        guard offset >= 0, offset + 4 <= bytes.count else { return -1 }
        var value = 0
        for k in offset..<offset + 4 {
            let b = bytes[k]
            let digit: Int
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int(b &- UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = Int(b &- UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = Int(b &- UInt8(ascii: "A")) + 10
            default: return -1
            }
            value = value << 4 | digit
        }
        return value
    }

    /// Strict UTF-8 check (RFC 3629): rejects overlongs, encoded surrogates, truncation and code points > U+10FFFF.
    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var i = 0
        while i < count {
            if i + 8 <= count && base.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                i += 8
                continue
            }
            let lead = bytes[i]
            if lead < 0x80 {
                i += 1
                continue
            }
            // The second byte's range is what excludes overlongs, surrogates and values above U+10FFFF.
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: return false
            }
            guard i + length <= count else { return false }
            let second = bytes[i + 1]
            guard second >= low && second <= high else { return false }
            for k in i + 2..<i + length where bytes[k] & 0xC0 != 0x80 {
                return false
            }
            i += length
        }
        return true
    }

    /// Decodes the escapes of a raw string body into UTF-8 bytes appended to `out`.
    ///
    /// Without `repair`, the body must be syntactically valid (the parser checked it) and an unpaired surrogate
    /// returns false. With `repair` (the writer's path for arbitrary bytes), unpaired surrogates become U+FFFD and
    /// malformed escapes are kept as literal text; the result is then always true. Raw bytes are copied untouched.
    static func decodeEscapes(_ raw: UnsafeRawBufferPointer, into out: inout [UInt8], repair: Bool) -> Bool {
        let count = raw.count
        var i = 0
        var runStart = 0
        while i < count {
            guard raw[i] == UInt8(ascii: "\\") else {
                i += 1
                continue
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[runStart..<i]))
            let kind: UInt8 = i + 1 < count ? raw[i + 1] : 0
            var consumed = 2
            switch kind {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
                out.append(kind)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u") where hex4(raw, at: i + 2) >= 0:
                let unit = UInt32(hex4(raw, at: i + 2))
                consumed = 6
                var scalar = unit
                if unit & 0xF800 == 0xD800 {
                    // A high surrogate needs an escaped low surrogate right after it; anything else is unpaired.
                    let low =
                        i + 7 < count && raw[i + 6] == UInt8(ascii: "\\") && raw[i + 7] == UInt8(ascii: "u")
                        ? hex4(raw, at: i + 8) : -1
                    if unit < 0xDC00 && low >= 0xDC00 && low <= 0xDFFF {
                        scalar = 0x10000 + ((unit - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        consumed = 12
                    } else if repair {
                        scalar = 0xFFFD
                    } else {
                        return false
                    }
                }
                appendUTF8(scalar, to: &out)
            default:
                // Only reachable with `repair`: keep the backslash as text and carry on after it.
                out.append(UInt8(ascii: "\\"))
                consumed = 1
            }
            i += consumed
            runStart = i
        }
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[runStart..<count]))
        return true
    }

    /// Appends the UTF-8 encoding of a scalar value (the caller guarantees it is not a surrogate).
    static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case 0..<0x80:
            out.append(UInt8(scalar))
        case 0x80..<0x800:
            out.append(0xC0 | UInt8(scalar >> 6))
            out.append(0x80 | UInt8(scalar & 0x3F))
        case 0x800..<0x10000:
            out.append(0xE0 | UInt8(scalar >> 12))
            out.append(0x80 | UInt8(scalar >> 6 & 0x3F))
            out.append(0x80 | UInt8(scalar & 0x3F))
        default:
            out.append(0xF0 | UInt8(scalar >> 18))
            out.append(0x80 | UInt8(scalar >> 12 & 0x3F))
            out.append(0x80 | UInt8(scalar >> 6 & 0x3F))
            out.append(0x80 | UInt8(scalar & 0x3F))
        }
    }

    /// The text a raw string body stands for, for output: escapes decoded, anything invalid replaced by U+FFFD.
    static func repairedString(_ raw: [UInt8]) -> String {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        raw.withUnsafeBytes { _ = decodeEscapes($0, into: &decoded, repair: true) }
        // The standard library's decoder substitutes U+FFFD for each maximal invalid subsequence.
        return String(decoding: decoded, as: UTF8.self)
    }

    /// "character 'x'" for printable ASCII, "byte 0xFF" otherwise, so messages stay readable and valid UTF-8.
    static func describe(_ b: UInt8) -> String {
        if b > 0x20 && b < 0x7F {
            return "character '" + String(UnicodeScalar(b)) + "'"
        }
        let digits: [Character] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "A", "B", "C", "D", "E", "F"]
        return "byte 0x" + String(digits[Int(b >> 4)]) + String(digits[Int(b & 0xF)])
    }
}
