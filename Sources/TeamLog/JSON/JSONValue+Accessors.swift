/// Typed views of a value, `nil` when it is of another kind.
extension JSONValue {
    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The integer, if this is an integer.
    public var intValue: Int64? {
        if case .int(let n) = self { return n }
        return nil
    }

    /// The bool, if this is a bool.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}

extension JSONValue {
    /// The value as every output shows it (`JSONWriter`): each `.invalidString` a `.string` with a U+FFFD
    /// for each invalid UTF-8 sequence and unpaired surrogate escape, each number beyond a `Double`'s range
    /// (`1e400`, parsed as an infinity) `null`; `self` when there is neither.
    public var repaired: JSONValue {
        guard needsRepair else { return self }
        switch self {
        case .invalidString(let raw): return .string(JSONParser.repairedString(raw))
        case .double(let number) where !number.isFinite: return .null
        case .array(let items): return .array(items.map(\.repaired))
        case .object(let pairs): return .object(pairs.map { ($0.0, $0.1.repaired) })
        default: return self
        }
    }

    /// Whether an `.invalidString` or a non-finite number is in the value (what `repaired` changes).
    public var needsRepair: Bool {
        switch self {
        case .invalidString: true
        case .double(let number): !number.isFinite
        case .array(let items): items.contains { $0.needsRepair }
        case .object(let pairs): pairs.contains { $0.1.needsRepair }
        default: false
        }
    }
}
