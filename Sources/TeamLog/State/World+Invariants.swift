/// Invariants of the projected state, checked by tests after every step of random sequences.
extension World {
    /// Every broken invariant, as text; empty when the state is sound.
    public func invariantViolations() -> [String] {
        var problems: [String] = []
        for (id, team) in teams {
            let owners = team.roster.filter { $0.role == .owner }
            if !team.dismissed {
                if owners.count != 1 { problems.append("team \(id) has \(owners.count) owners") }
                if team.member(team.owner)?.role != .owner {
                    problems.append("team \(id): owner \(team.owner) is not a member with role owner")
                }
            } else if MemberBits.count(team.bits.online) != 0 {
                problems.append("dismissed team \(id) has members marked online")
            }
            if team.roster.count != team.memberCount || team.slotOf.count != team.memberCount {
                problems.append(
                    "team \(id): roster \(team.roster.count), slot index \(team.slotOf.count) != member count \(team.memberCount)"
                )
            }
            for (slot, member) in team.slots.enumerated() {
                guard let member else { continue }
                if Int(member.slot) != slot || team.slotOf[member.user] != member.slot {
                    problems.append("team \(id): \(member.user) slot mismatch")
                }
            }
            for invitee in team.invites.keys where team.isMember(invitee) {
                problems.append("team \(id): \(invitee) is both a member and invited")
            }
            for applicant in team.applications.keys where team.isMember(applicant) {
                problems.append("team \(id): \(applicant) is both a member and applying")
            }
            for (invitee, inviters) in team.invites where inviters.isEmpty {
                problems.append("team \(id): empty invitation list for \(invitee)")
            }
            if team.memberCount > config.maxMembers(team.kind) {
                problems.append("team \(id) has \(team.memberCount) members, over its limit")
            }
        }
        for (id, team) in teams {
            for (user, memberships) in team.past {
                let ordered = zip(memberships, memberships.dropFirst()).allSatisfy { $0.leaveSeq <= $1.joinSeq }
                let beforeNow =
                    team.member(user).map { m in memberships.allSatisfy { $0.leaveSeq <= m.joinSeq } } ?? true
                if memberships.isEmpty || !ordered || !beforeNow {
                    problems.append("team \(id): ended memberships of \(user) overlap or are out of order")
                }
            }
        }
        for (id, tally) in receipts {
            if tally.readCount > tally.receiverCount || (tally.complete && tally.readers.count != tally.readCount) {
                problems.append(
                    "receipts of \(id): \(tally.readCount) read of \(tally.receiverCount), \(tally.readers.count) readers known, complete \(tally.complete)"
                )
            }
            if let directed = tally.directedReceivers, directed.count != tally.receiverCount {
                problems.append("receipts of \(id): \(directed.count) directed receivers, count \(tally.receiverCount)")
            }
        }
        // Every own broadcast is also a counted broadcast of its conversation (when both are resident).
        for (user, views) in userConvs {
            for (key, uc) in views where convs[key] != nil && uc.hasTotals && uc.ownTotal > convs[key]!.countedTotal {
                problems.append("\(user) in \(key): \(uc.ownTotal) own broadcasts of \(convs[key]?.countedTotal ?? 0)")
            }
        }
        return problems + derivedIndexViolations()
    }

    /// Traps with the list of violations when an invariant is broken.
    public func checkInvariants() {
        let problems = invariantViolations()
        precondition(problems.isEmpty, problems.joined(separator: "\n"))
    }
}
