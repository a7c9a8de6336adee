/// A failure of the NATS transport that says what was attempted (connect, publish, query), for the CLI
/// to print before exiting non-zero. A `permanent` one (a configuration that cannot work) is not retried.
public struct ClusterError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// Asking again cannot succeed (a mismatched deployment, a refused configuration).
    public var permanent: Bool
    public init(_ description: String, permanent: Bool = false) {
        self.description = description
        self.permanent = permanent
    }
}
