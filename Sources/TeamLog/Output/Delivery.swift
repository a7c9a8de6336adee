/// Who receives a message and who is alerted, with the reason for every silenced receiver (SPEC §2, §4).
///
/// A team message's lists are held as its fan-out's bitsets over the roster as it was (`TeamState.slots`,
/// shared copy-on-write with the team until the roster next changes), and listed by id only when read:
/// making one costs O(members / 64) and nothing per member, whether or not anyone reads it (the record
/// stream keeps tens of thousands of deliveries that no subscriber may ever ask for). Every view —
/// `receivers`, `alerted`, `silenced`, `forEachReceiver` — lists in slot order, then any extra receivers.
public struct Delivery: Sendable, Equatable {
    public var seq: UInt64
    /// The conversation as the sender named it.
    public var to: Conversation
    public var messageId: Id
    /// The lists, as ids or as a team fan-out.
    var lists: Lists

    enum Lists: Sendable {
        case ids(receivers: [Id], alerted: [Id], silenced: [(user: Id, reason: SilenceReason)])
        case fanOut(FanOutLists)
    }

    /// A team fan-out's result: the roster at the message and, per slot, receives / silenced by notify
    /// `none` / silenced by `managerOnly` (three bitsets of `wordCount` words each, in one array), or one
    /// reason for every receiver; then extra receivers, each silenced for its reason.
    struct FanOutLists: Sendable {
        var roster: [Member?]
        var words: [UInt64]
        var wordCount: Int
        var silenceAll: SilenceReason?
        var extra: [(user: Id, reason: SilenceReason)] = []

        /// The reason a receiving slot is silenced, or `nil` when alerted.
        @inline(__always)
        func reason(_ slot: Int) -> SilenceReason? {
            if let silenceAll { return silenceAll }
            let w = slot >> 6
            let bit: UInt64 = 1 << UInt64(slot & 63)
            if words[wordCount + w] & bit != 0 { return .notifyNone }
            if words[2 * wordCount + w] & bit != 0 { return .managerOnly }
            return nil
        }
    }

    /// A delivery of listed ids (`silenced` in receiver order).
    public init(
        seq: UInt64, to: Conversation, messageId: Id, receivers: [Id], alerted: [Id],
        silenced: [(user: Id, reason: SilenceReason)]
    ) {
        self.seq = seq
        self.to = to
        self.messageId = messageId
        lists = .ids(receivers: receivers, alerted: alerted, silenced: silenced)
    }

    /// The delivery of the fan-out just run over `roster` (the team's slots).
    public init(seq: UInt64, to: Conversation, messageId: Id, fanOut: FanOut, roster: [Member?]) {
        precondition(fanOut.hasAlerts, "a delivery lists alerts: the fan-out must have decided them")
        self.seq = seq
        self.to = to
        self.messageId = messageId
        let n = fanOut.receivers.count
        var words: [UInt64] = []
        words.reserveCapacity(3 * n)
        words += fanOut.receivers
        if fanOut.silenceAll == nil {
            words += fanOut.silencedNone
            words += fanOut.silencedManagerOnly
        }
        lists = .fanOut(FanOutLists(roster: roster, words: words, wordCount: n, silenceAll: fanOut.silenceAll))
    }

    /// Adds receivers after the listed ones, all silenced for `reason` (a tip's removed members).
    public mutating func appendSilenced(_ users: [Id], reason: SilenceReason) {
        guard !users.isEmpty else { return }
        switch lists {
        case .ids(var receivers, let alerted, var silenced):
            receivers += users
            silenced += users.map { ($0, reason) }
            lists = .ids(receivers: receivers, alerted: alerted, silenced: silenced)
        case .fanOut(var f):
            f.extra += users.map { ($0, reason) }
            lists = .fanOut(f)
        }
    }

    /// Calls `body` with every receiver in order and the reason they are silenced (`nil`: alerted).
    public func forEachReceiver(_ body: (Id, SilenceReason?) -> Void) {
        switch lists {
        case .ids(let receivers, _, let silenced):
            // `silenced` is in receiver order: walk both.
            var s = 0
            for user in receivers {
                if s < silenced.count && silenced[s].user == user {
                    body(user, silenced[s].reason)
                    s += 1
                } else {
                    body(user, nil)
                }
            }
        case .fanOut(let f):
            // Each receiver's id is read in place: reading `roster[slot]!.user` copies the whole member
            // first (the optimizer keeps the copy), which cost more than writing the id out. An optional's
            // payload lies at its offset 0, so a member's `user` lies at the same offset in `Member?`.
            let stride = MemoryLayout<Member?>.stride
            let offset = Self.userOffset
            f.roster.withUnsafeBytes { roster in
                let base = roster.baseAddress!
                for w in 0..<f.wordCount {
                    var bits = f.words[w]
                    while bits != 0 {
                        let slot = w << 6 | bits.trailingZeroBitCount
                        assert(f.roster[slot] != nil, "a receiver's slot is empty")
                        let user = (base + slot * stride + offset).assumingMemoryBound(to: Id.self).pointee
                        assert(user == f.roster[slot]!.user)
                        body(user, f.reason(slot))
                        bits &= bits &- 1
                    }
                }
            }
            for (user, reason) in f.extra { body(user, reason) }
        }
    }

    /// Where a member's id lies in it.
    private static let userOffset = MemoryLayout<Member>.offset(of: \Member.user)!

    /// Every receiver.
    public var receivers: [Id] {
        if case .ids(let receivers, _, _) = lists { return receivers }
        var out: [Id] = []
        out.reserveCapacity(receiverCount)
        forEachReceiver { user, _ in out.append(user) }
        return out
    }

    /// The receivers alerted.
    public var alerted: [Id] {
        if case .ids(_, let alerted, _) = lists { return alerted }
        var out: [Id] = []
        forEachReceiver { user, reason in if reason == nil { out.append(user) } }
        return out
    }

    /// Silenced receivers with their reason, in receiver order.
    public var silenced: [(user: Id, reason: SilenceReason)] {
        if case .ids(_, _, let silenced) = lists { return silenced }
        var out: [(user: Id, reason: SilenceReason)] = []
        forEachReceiver { user, reason in if let reason { out.append((user, reason)) } }
        return out
    }

    /// How many receive it (without listing them).
    public var receiverCount: Int {
        switch lists {
        case .ids(let receivers, _, _): receivers.count
        case .fanOut(let f): Self.count(f.words[0..<f.wordCount]) + f.extra.count
        }
    }

    /// How many receivers are silenced (without listing them).
    public var silencedCount: Int {
        switch lists {
        case .ids(_, _, let silenced): silenced.count
        case .fanOut(let f):
            f.silenceAll != nil
                ? receiverCount
                : Self.count(f.words[f.wordCount..<3 * f.wordCount]) + f.extra.count
        }
    }

    private static func count(_ words: ArraySlice<UInt64>) -> Int { words.reduce(0) { $0 + $1.nonzeroBitCount } }

    public static func == (a: Delivery, b: Delivery) -> Bool {
        a.seq == b.seq && a.to == b.to && a.messageId == b.messageId && a.receivers == b.receivers
            && a.alerted == b.alerted && a.silenced.map(\.user) == b.silenced.map(\.user)
            && a.silenced.map(\.reason) == b.silenced.map(\.reason)
    }
}
