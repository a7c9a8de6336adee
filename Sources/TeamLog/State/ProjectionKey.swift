/// One stored projection record that an event changed; the store rewrites (or deletes) exactly these.
public enum ProjectionKey: Hashable, Sendable {
    /// A team's information record.
    case team(String)
    /// One member record: team, user.
    case member(String, String)
    /// One invitee's pending invitations: team, invitee.
    case invite(String, String)
    /// One pending application: team, applicant.
    case application(String, String)
}
