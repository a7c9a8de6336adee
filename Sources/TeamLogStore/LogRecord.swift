/// A stored log value: the encoded event followed by its 32-byte chained hash.
public struct LogRecord {
    /// The encoded event.
    public var payload: UnsafeRawBufferPointer
    /// The chained hash stored with it.
    public var hash: UnsafeRawBufferPointer

    /// Splits a stored value; `nil` when it is too short to hold a hash.
    public init?(_ value: UnsafeRawBufferPointer) {
        guard value.count > HashChain.size else { return nil }
        payload = UnsafeRawBufferPointer(rebasing: value[..<(value.count - HashChain.size)])
        hash = UnsafeRawBufferPointer(rebasing: value[(value.count - HashChain.size)...])
    }
}
