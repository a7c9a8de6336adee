/// One stored projection record that an event changed; the store rewrites (or deletes) exactly these.
public enum ProjectionKey: Hashable, Sendable {
    /// A team's information record.
    case team(Id)
    /// One member record: team, user.
    case member(Id, Id)
    /// One user's ended memberships of a team: team, user.
    case pastMembers(Id, Id)
    /// One invitee's pending invitations: team, invitee.
    case invite(Id, Id)
    /// One pending application: team, applicant.
    case application(Id, Id)
    /// A stored message (or the id of an unstored one).
    case message(Id)
    /// A conversation's shared record (last message).
    case conv(ConvKey)
    /// One counted broadcast in a conversation (append-only index): conversation, seq, and its ordinal
    /// (1, 2, 3, … within the conversation), which is the record's value.
    ///
    /// An index record never changes once written, so its key carries its value. A key read back from
    /// stored bytes (`ProjectionCodec.key`) has ordinal 0: the ordinal is not part of the key's bytes.
    case counted(ConvKey, UInt64, ordinal: UInt64)
    /// One counted broadcast by its sender (append-only index): conversation, sender, seq, and its ordinal
    /// within conversation × sender.
    case own(ConvKey, Id, UInt64, ordinal: UInt64)
    /// One counted message received individually (append-only index): conversation, user, seq, and its
    /// ordinal within conversation × user.
    case directed(ConvKey, Id, UInt64, ordinal: UInt64)
    /// One user's view of one conversation.
    case userConv(Id, ConvKey)
    /// A receipt tally: how many received the message, and who (only when directed).
    case receipt(Id)
    /// One receipt (append-only index): message, reader, and its ordinal (1, 2, 3, … in receipt order),
    /// which is the record's value. A key read back from stored bytes has ordinal 0.
    case receiptRead(Id, Id, ordinal: UInt64)
    /// A user's online devices and offline time.
    case presence(Id)
    /// A signaling channel.
    case channel(Id)
    /// A user's stored offline notifications.
    case offline(Id)
}
