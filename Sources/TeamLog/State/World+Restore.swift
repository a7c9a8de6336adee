/// Restoring (the store, from its tables): one stored record at a time written into the projected tables
/// as stored, before `finishRestore` derives what is not stored (the user → teams index, online bits,
/// the counts the size estimate keeps). The tables' setters are internal to this module, so these are
/// the only writes from outside it besides `apply` and the working set's `adopt…` and `evict`.
extension World {
    /// The log position the restored tables are at (the checkpoint's seq and time).
    public mutating func restorePosition(seq: UInt64, ts: Int64) {
        lastSeq = seq
        lastTs = ts
    }

    public mutating func restoreTeam(_ team: TeamState) {
        teams[team.id] = team
    }

    /// Changes a restored team in place (its members, past members, invitations, applications);
    /// `false`, with nothing run, when no such team is restored.
    public mutating func restoreInTeam(_ id: Id, _ change: (inout TeamState) throws -> Void) rethrows -> Bool {
        guard let index = teams.index(forKey: id) else { return false }
        try change(&teams.values[index])
        return true
    }

    public mutating func restoreMessage(_ id: Id, _ message: StoredMessage) {
        messages[id] = message
    }

    /// Changes a conversation, restoring an empty one first when there is none.
    public mutating func restoreConv(_ key: ConvKey, _ change: (inout ConvState) -> Void) {
        change(&convs[key, default: ConvState()])
    }

    /// Changes a user's view of a conversation, restoring an empty one first when there is none.
    public mutating func restoreUserConv(_ user: Id, _ key: ConvKey, _ change: (inout UserConv) -> Void) {
        userConvs[user, default: [:]].upsert(key, default: UserConv(), change)
    }

    public mutating func restoreReceipt(_ id: Id, _ tally: ReceiptState) {
        receipts[id] = tally
    }

    /// Records a stored reader of a restored tally: `nil` when there is no such tally, `false` when the
    /// ordinal is out of range or taken.
    public mutating func restoreRead(_ id: Id, _ user: Id, ordinal: UInt64) -> Bool? {
        receipts.withValue(forKey: id) { $0.restoreRead(user, ordinal: ordinal) }
    }

    public mutating func restorePresence(_ user: Id, _ presence: Presence) {
        self.presence[user] = presence
    }

    public mutating func restoreChannel(_ channel: ChannelState) {
        channels[channel.id] = channel
    }

    public mutating func restoreOfflineQueue(_ user: Id, _ queue: [StoredSignal]) {
        offlineQueues[user] = queue
    }
}
