/// A failure of the store itself (not of an input line): the run stops with a non-zero status.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
