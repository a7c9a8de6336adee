public import TeamLog

extension Store {
    /// The layout of databases and records this build reads and writes (stored in `meta` as `format`).
    public static var format: UInt64 { Databases.format }
}

/// Settings asked for by whoever opens a store for writing (`--max-team-members` …; `nil`: not asked).
///
/// A new store is created with them. An existing store keeps the settings its log was decided under
/// (a replay must apply the same limits), so asking it for different ones is refused rather than ignored.
public struct ConfigRequest: Sendable, Equatable {
    /// Most members of a `team` (SPEC: 2,000).
    public var teamMaxMembers: Int?
    /// Most members of a `superTeam` (SPEC: 200,000).
    public var superTeamMaxMembers: Int?
    /// Members sync timeout in ms (SPEC: 120 s).
    public var membersSyncTimeoutMs: Int64?

    public init(teamMaxMembers: Int? = nil, superTeamMaxMembers: Int? = nil, membersSyncTimeoutMs: Int64? = nil) {
        self.teamMaxMembers = teamMaxMembers
        self.superTeamMaxMembers = superTeamMaxMembers
        self.membersSyncTimeoutMs = membersSyncTimeoutMs
    }

    /// `base` with the asked-for settings in place.
    public func applied(to base: Config) -> Config {
        var c = base
        if let teamMaxMembers { c.teamMaxMembers = teamMaxMembers }
        if let superTeamMaxMembers { c.superTeamMaxMembers = superTeamMaxMembers }
        if let membersSyncTimeoutMs { c.membersSyncTimeoutMs = membersSyncTimeoutMs }
        return c
    }

    /// The asked-for settings that differ from `stored`, in words.
    public func differences(from stored: Config) -> [String] {
        var out: [String] = []
        if let v = teamMaxMembers, v != stored.teamMaxMembers {
            out.append("--max-team-members \(v) (the store has \(stored.teamMaxMembers))")
        }
        if let v = superTeamMaxMembers, v != stored.superTeamMaxMembers {
            out.append("--max-super-team-members \(v) (the store has \(stored.superTeamMaxMembers))")
        }
        if let v = membersSyncTimeoutMs, v != stored.membersSyncTimeoutMs {
            out.append("--members-sync-ms \(v) (the store has \(stored.membersSyncTimeoutMs))")
        }
        return out
    }

    /// Largest accepted member limit (member slots and bitsets are sized by the members present, but a
    /// limit is stored as a varint and compared with counts: keep it in a sane range).
    public static let maxLimit = 100_000_000

    /// Throws `.invalidConfig` for a setting out of range.
    public func validate() throws {
        var problems: [String] = []
        for (name, value) in [("--max-team-members", teamMaxMembers), ("--max-super-team-members", superTeamMaxMembers)] {
            if let value, value < 1 || value > Self.maxLimit {
                problems.append("\(name) must be between 1 and \(Self.maxLimit), not \(value)")
            }
        }
        if let v = membersSyncTimeoutMs, v < 1 || v > Int64(Int32.max) * 1000 {
            problems.append("--members-sync-ms must be a positive number of milliseconds, not \(v)")
        }
        guard problems.isEmpty else {
            throw StoreError(code: .invalidConfig, message: problems.joined(separator: "; "))
        }
    }
}
