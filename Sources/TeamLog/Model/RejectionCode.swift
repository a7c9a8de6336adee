/// Why an input line or an operation was rejected: the exact codes of SPEC §4.
public enum RejectionCode: String, Sendable, CaseIterable, Hashable {
    case badJSON, lineTooLong, unknownOp, missingField, badField, badId
    case noSuchTeam, teamExists, noSuchChannel, noSuchMessage, notMember, alreadyMember
    case notPermitted, ownerCannotLeave, dismissed, closed, muted, teamMuted, teamFull
    case duplicateMessageId, noInvitation, noApplication
}

/// A rejected line or operation: the code plus a reason a person can act on. Nothing was stored.
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// The SPEC code.
    public var code: RejectionCode
    /// Human text naming the field, target or rule.
    public var reason: String

    public init(_ code: RejectionCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "\(code.rawValue): \(reason)" }
}
