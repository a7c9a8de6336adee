/// A failure of the NATS transport that says what was attempted (connect, publish, query), for the CLI
/// to print before exiting non-zero.
public struct ClusterError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
