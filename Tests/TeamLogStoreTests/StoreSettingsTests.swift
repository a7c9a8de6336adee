import LMDB
import TeamLog
@testable import TeamLogStore
import TestSupport
import Testing

/// The member limits and the members-sync timeout (SPEC: "configurable") are set by the command that
/// creates a store, shown by `teamlog info`, and refused on a store created with other values.
@Suite struct StoreSettingsTests {
    static let exe = TestSupport.teamlogExecutable

    @Test func ingestCreatesAStoreWithTheAskedLimitsAndRefusesOthersLater() throws {
        let dir = TemporaryDirectory("settings")
        let store = dir.child("store")
        let input = dir.child("ops.jsonl")
        try CrashSafetyTests.writeFile(
            input,
            Array(
                """
                {"op":"team.create","actor":"a","team":"small","members":["b","c"],"opId":"s-1"}
                {"op":"team.invite","actor":"a","team":"small","targets":["d"],"opId":"s-2"}

                """.utf8))
        let created = try ChildProcess.run(
            Self.exe,
            ["ingest", input, "--store", store, "--max-team-members", "3", "--max-super-team-members", "10",
             "--members-sync-ms", "5000"], timeout: 60)
        #expect(created.status == .exited(0))
        let codes = created.lines.compactMap { try? JSONParser.parse($0)["code"]?.stringValue }
        #expect(codes == ["teamFull"], "a fourth member passes the limit of 3: \(created.lines)")

        let info = try ChildProcess.run(Self.exe, ["info", "--store", store, "--json"], timeout: 60)
        #expect(info.status == .exited(0))
        let shown = try JSONParser.parse(try #require(info.lines.first))
        #expect(shown["maxTeamMembers"]?.intValue == 3)
        #expect(shown["maxSuperTeamMembers"]?.intValue == 10)
        #expect(shown["membersSyncMs"]?.intValue == 5000)
        #expect(shown["seq"]?.intValue == 1)
        let text = try ChildProcess.run(Self.exe, ["info", "--store", store], timeout: 60)
        #expect(text.lines.contains { $0.hasPrefix("max team members") && $0.hasSuffix(" 3") }, "\(text.lines)")

        // Other values on the existing store: refused, naming both, and nothing appended.
        let err = dir.child("refused.err")
        let refused = try ChildProcess.run(
            Self.exe, ["ingest", input, "--store", store, "--max-team-members", "5"], stderr: err, timeout: 60)
        #expect(refused.status != .exited(0))
        let message = CrashSafetyTests.readText(err)
        #expect(message.contains("--max-team-members 5 (the store has 3)"), "\(message)")
        #expect(refused.lines.isEmpty)
        // The same values, or none: the store opens and the ops are duplicates.
        for extra in [["--max-team-members", "3"], []] {
            let again = try ChildProcess.run(Self.exe, ["ingest", input, "--store", store] + extra, timeout: 60)
            #expect(again.status == .exited(0), "\(extra)")
            #expect(again.lines.first?.contains(#""kind":"duplicate""#) == true, "\(again.lines)")
        }
    }

    @Test func theStoreAPIRefusesOtherAndInvalidSettingsWithTheirCodes() throws {
        let dir = TemporaryDirectory("settings-api")
        let path = dir.child("store")
        var options = Store.Options()
        options.requestedConfig = ConfigRequest(teamMaxMembers: 7)
        do {
            let store = try Store(path: path, options: options)
            #expect(store.world.config.teamMaxMembers == 7)
            #expect(store.world.config.superTeamMaxMembers == Config().superTeamMaxMembers)
            store.close()
        }
        options.requestedConfig = ConfigRequest(teamMaxMembers: 8)
        let mismatch = #expect(throws: StoreError.self) { try Store(path: path, options: options) }
        #expect(mismatch?.code == .configMismatch)
        options.requestedConfig = ConfigRequest(membersSyncTimeoutMs: -1)
        let invalid = #expect(throws: StoreError.self) { try Store(path: dir.child("other"), options: options) }
        #expect(invalid?.code == .invalidConfig)
        options.requestedConfig = ConfigRequest()
        let reopened = try Store(path: path, options: options)
        defer { reopened.close() }
        #expect(reopened.world.config.teamMaxMembers == 7, "a store keeps the settings it was created with")
    }

    /// The settings decide every op (a team's member limit) and no hash chain covers them: one damaged
    /// byte of their record changed decisions while `audit` said OK. The record carries a checksum now: a
    /// writer refuses a damaged one (nothing decided), `audit` fails naming it, `info` says so; a record from
    /// before the checksum is read as it is and given one by the next writer.
    @Test func aDamagedSettingsRecordIsRefusedAndAudited() throws {
        let dir = TemporaryDirectory("settings-damaged")
        let store = dir.child("store")
        let input = dir.child("ops.jsonl")
        try CrashSafetyTests.writeFile(input, Array(#"{"op":"team.create","actor":"a","ts":1,"team":"t","members":["b"]}"#.utf8) + [0x0A])
        #expect(try ChildProcess.run(Self.exe, ["ingest", input, "--store", store, "--max-team-members", "80"], timeout: 60).status == .exited(0))
        func record() throws -> [UInt8] {
            let env = try Environment(path: store)
            let meta = try env.openHandle("meta", create: false)
            return try #require(try env.read { txn in try txn.get(meta, key: Array("config".utf8)) })
        }
        func put(_ bytes: [UInt8]) throws {
            let env = try Environment(path: store)
            let meta = try env.openHandle("meta", create: false)
            try env.write { txn in try txn.put(meta, key: Array("config".utf8), value: bytes) }
        }
        let checked = try record()
        #expect(checked.first == 2 && checked.count > 9)

        // A record from before the checksum: read as it is, and rewritten with one (the same settings).
        var legacy = checked.dropLast(8).map { $0 }
        legacy[0] = 1
        try put(legacy)
        let reader = try Store.reader(at: store)
        #expect(reader.settingsDamage == nil && reader.world.config.teamMaxMembers == 80)
        reader.close()
        try Store(path: store).close()
        #expect(try record() == checked)

        // One byte of the limit changed (80 → 81): refused by a writer, reported by audit and info.
        var damaged = checked
        damaged[1] ^= 1
        try put(damaged)
        #expect { try Store(path: store) } throws: { error in
            (error as? StoreError)?.code == .corrupted && "\(error)".contains("settings record")
        }
        let again = try ChildProcess.run(Self.exe, ["ingest", input, "--store", store], stderr: dir.child("ingest.err"), timeout: 60)
        #expect(again.status == .exited(1) && readTextFile(dir.child("ingest.err")).contains("is damaged"))
        let audit = try ChildProcess.run(Self.exe, ["audit", "--store", store], timeout: 60)
        #expect(audit.status == .exited(1), "\(audit.lines)")
        #expect(audit.lines.contains { $0.hasPrefix("settings: DAMAGED") } && audit.lines.last == "audit FAILED", "\(audit.lines)")
        let info = try ChildProcess.run(Self.exe, ["info", "--store", store], stderr: dir.child("info.err"), timeout: 60)
        #expect(info.status == .exited(1) && readTextFile(dir.child("info.err")).contains("is damaged"))
        try put(checked)
        #expect(try ChildProcess.run(Self.exe, ["audit", "--store", store], timeout: 60).status == .exited(0))
    }
}
