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

extension ProjectionKey {
    /// The hash the change set's `dirty` set uses: the case and its ids chained through `Id.bytesHash`
    /// under the set's seed, instead of feeding `Hasher` (SipHash-1-3) a case tag and each id — its set-up
    /// alone was 5% of a big dismiss's writer. A function of what `==` compares (an index record's ordinal
    /// left out), so equal keys hash alike.
    public func _rawHashValue(seed: Int) -> Int {
        var h = UInt64(truncatingIfNeeded: seed)
        func word(_ x: UInt64) {
            h = (h ^ x) &* 0x9e37_79b9_7f4a_7c15
            h ^= h >> 29
        }
        func id(_ x: Id) { h = Id.bytesHash(x.string, seed: h) }
        func conv(_ c: ConvKey) { h = UInt64(truncatingIfNeeded: c._rawHashValue(seed: Int(truncatingIfNeeded: h))) }
        word(UInt64(tag))
        switch self {
        case .team(let a), .message(let a), .receipt(let a), .presence(let a), .channel(let a), .offline(let a):
            id(a)
        case .member(let a, let b), .pastMembers(let a, let b), .invite(let a, let b), .application(let a, let b),
            .receiptRead(let a, let b, _):
            id(a)
            id(b)
        case .conv(let c):
            conv(c)
        case .counted(let c, let seq, _):
            conv(c)
            word(seq)
        case .own(let c, let user, let seq, _), .directed(let c, let user, let seq, _):
            conv(c)
            id(user)
            word(seq)
        case .userConv(let user, let c):
            id(user)
            conv(c)
        }
        return Int(truncatingIfNeeded: h)
    }
}

extension ProjectionKey {
    /// The case, as a number (for `_rawHashValue(seed:)`: two cases with the same ids hash apart).
    var tag: Int {
        switch self {
        case .team: 1
        case .member: 2
        case .pastMembers: 3
        case .invite: 4
        case .application: 5
        case .message: 6
        case .conv: 7
        case .counted: 8
        case .own: 9
        case .directed: 10
        case .userConv: 11
        case .receipt: 12
        case .receiptRead: 13
        case .presence: 14
        case .channel: 15
        case .offline: 16
        }
    }
}
