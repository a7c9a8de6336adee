/// Invariants of the derived indexes against their sources (as swift-collections checks an `OrderedSet`'s
/// hash table against its elements): the fan-out bitsets against the rosters and presence, the user → teams
/// and user → channels indexes against the rosters and channels, the members-sync queue against the
/// channels and presence, receipt tallies' reader ordinals against their list, and the working set's
/// resident counts against the tables.
extension World {
    /// Every derived index entry that disagrees with its source, as text; empty when all agree.
    public func derivedIndexViolations() -> [String] {
        var problems: [String] = []
        // Rosters → bitsets, and → derived.userTeams.
        var expectedUserTeams: [Id: SmallIdSet] = [:]
        for (id, team) in teams {
            let bits = team.bits
            let words = (team.slots.count + 63) / 64
            if bits.wordCount != words { problems.append("team \(id): \(bits.wordCount) bitset words for \(words)") }
            for slot in 0..<min(team.slots.count, bits.wordCount * 64) {
                let member = team.slots[slot]
                func check(_ name: String, _ words: [UInt64], _ expected: Bool) {
                    if MemberBits.test(words, slot) != expected {
                        problems.append("team \(id) slot \(slot): \(name) bit is \(!expected), expected \(expected)")
                    }
                }
                check("present", bits.present, member != nil)
                check("admin", bits.admins, member?.role.isAdmin ?? false)
                check("notify none", bits.notifyNone, member?.notify == NotifyState.none)
                check("notify managerOnly", bits.notifyManagerOnly, member?.notify == .managerOnly)
                check("online", bits.online, !team.dismissed && (member.map { isOnline($0.user) } ?? false))
            }
            guard !team.dismissed else { continue }
            for member in team.slots.compactMap({ $0 }) { expectedUserTeams[member.user, default: []].insert(id) }
        }
        if derived.userTeams != expectedUserTeams {
            let wrong = Set(derived.userTeams.keys).union(expectedUserTeams.keys).filter {
                derived.userTeams[$0] != expectedUserTeams[$0]
            }
            problems.append("derived.userTeams differs from the rosters for \(wrong.sorted().prefix(5))")
        }
        // Open channels → derived.userChannels, and → the members-sync queue and deadline.
        var expectedUserChannels: [Id: Set<Id>] = [:]
        var due: [(channel: Id, user: Id, deadline: Int64)] = []
        for (id, channel) in channels where !channel.closed {
            for (user, joined) in channel.members {
                expectedUserChannels[user, default: []].insert(id)
                if let deadline = syncDeadline(user, joinedTs: joined) { due.append((id, user, deadline)) }
            }
        }
        if derived.userChannels != expectedUserChannels {
            let wrong = Set(derived.userChannels.keys).union(expectedUserChannels.keys).filter {
                derived.userChannels[$0] != expectedUserChannels[$0]
            }
            problems.append("derived.userChannels differs from the channels for \(wrong.sorted().prefix(5))")
        }
        let queued = derived.syncQueue.entries
        for d in due where !queued.contains(where: { $0.channel == d.channel && $0.user == d.user && $0.deadline == d.deadline }) {
            problems.append("members sync: \(d.user) in \(d.channel), due at \(d.deadline), is not queued")
        }
        if derived.syncDeadline != due.map(\.deadline).min() {
            problems.append(
                "members sync deadline \(derived.syncDeadline.map(String.init) ?? "none"), expected "
                    + "\(due.map(\.deadline).min().map(String.init) ?? "none")")
        }
        // Receipt tallies: readers' ordinals are distinct and within the count (exactly 1...count when all
        // are known); no more readers than receivers.
        for (id, tally) in receipts {
            let ordinals = Set(tally.readers.values)
            if ordinals.count != tally.readers.count || ordinals.contains(where: { $0 < 1 || $0 > UInt64(tally.readCount) })
                || (tally.complete && ordinals.count != tally.readCount)
            {
                problems.append("receipt \(id): reader ordinals \(ordinals.sorted().prefix(5)) for \(tally.readCount) receipts")
            }
            if tally.readCount > tally.receiverCount { problems.append("receipt \(id): more readers than receivers") }
            if let directed = tally.directedReceivers, directed.count != tally.receiverCount {
                problems.append("receipt \(id): \(directed.count) directed receivers, count \(tally.receiverCount)")
            }
        }
        // The working set's counts against the tables they count.
        let userConvs = userConvs.values.reduce(0) { $0 + $1.count }
        if residentCounts.userConvs != userConvs {
            problems.append("resident user conversations counted \(residentCounts.userConvs), held \(userConvs)")
        }
        let readers = receipts.values.reduce(0) { $0 + $1.readers.count }
        if residentCounts.readers != readers {
            problems.append("resident receipt readers counted \(residentCounts.readers), held \(readers)")
        }
        return problems
    }
}
