/// A parsed JSON value. Objects keep key order (an array of pairs) because output order matters to us.
///
/// Equality is structural and exact: strings and keys compare by their UTF-8 bytes (the same rule the parser uses
/// for duplicate keys, RFC 8259 §8.3), not by Swift's canonical equivalence; objects compare pair by pair in order;
/// `.int(1)` and `.double(1)` are different values.
public enum JSONValue: Equatable, Sendable {
    /// The literal `null`.
    case null
    /// The literal `true` or `false`.
    case bool(Bool)
    /// A number token with no fraction or exponent that fits `Int64`.
    case int(Int64)
    /// Any other number (fraction, exponent, or integer too big for `Int64`); ±infinity when out of range.
    case double(Double)
    /// A string whose decoded content is valid Unicode.
    case string(String)
    /// A string with invalid UTF-8 or an unpaired surrogate escape: the raw, undecoded bytes between the quotes.
    case invalidString([UInt8])
    /// An array, in document order.
    case array([JSONValue])
    /// An object as key/value pairs in document order; keys from the parser are unique.
    case object([(String, JSONValue)])

    /// Value for a key of an object (linear scan is fine; objects are small), nil otherwise.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let pairs) = self else { return nil }
        for pair in pairs where JSONValue.sameUTF8(pair.0, key) {
            return pair.1
        }
        return nil
    }

    /// Exact structural equality (see the type documentation).
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null):
            return true
        case let (.bool(a), .bool(b)):
            return a == b
        case let (.int(a), .int(b)):
            return a == b
        case let (.double(a), .double(b)):
            return a == b
        case let (.string(a), .string(b)):
            return sameUTF8(a, b)
        case let (.invalidString(a), .invalidString(b)):
            return a == b
        case let (.array(a), .array(b)):
            return a == b
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            for index in a.indices where !sameUTF8(a[index].0, b[index].0) || a[index].1 != b[index].1 {
                return false
            }
            return true
        default:
            return false
        }
    }

    /// Byte-wise string equality. Swift's `==` treats canonically equivalent strings ("é" vs "e\u{301}") as equal,
    /// but JSON keys that differ in their code points are different keys.
    static func sameUTF8(_ a: String, _ b: String) -> Bool {
        // Byte-equal strings have equal lengths and are `==`; both are quick filters (`==` of two small ASCII strings
        // compares their bits), and only a match needs its bytes compared, in place, to rule out a merely equivalent
        // spelling. (That check was `elementsEqual` over the two UTF-8 views, a generic loop: 7% of the parser
        // thread's samples — perf, batch ingest of the bench mix.)
        let ua = a.utf8
        let ub = b.utf8
        guard ua.count == ub.count, a == b else { return false }
        let same = ua.withContiguousStorageIfAvailable { pa in
            ub.withContiguousStorageIfAvailable { pb in pa.elementsEqual(pb) }
        }
        if let same, let same { return same }
        return ua.elementsEqual(ub)
    }
}
