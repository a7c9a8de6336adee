import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog demo`: a realistic generated workload ingested into a temporary store, with a short report.
struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate a realistic workload, ingest it into a temporary store, report and show a team.")

    @Option(help: "Operations to generate.")
    var ops: Int = 200_000

    @Option(help: "Workload seed.")
    var seed: UInt64 = 42

    /// `--store PATH` as every command takes it (SPEC §5), or `--keep PATH`: the demo's store is made there
    /// and kept. Without either it is a temporary directory, removed at the end — never the default store
    /// (`./teamlog-store`, `$TEAMLOG_STORE`), which a demo's generated ops would fill.
    @Option(
        name: [.customLong("store"), .customLong("keep")],
        help: "Make the store at this path and keep it (--keep is the same), instead of a temporary directory.")
    var keep: String?

    @OptionGroup var settings: SettingsOptions

    func run() throws {
        // Under $TMPDIR (or /tmp), like the scratch stores; removed with everything in it.
        let base = environment("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/teamlog-demo-XXXXXX".utf8CString)
        let path: String
        if let keep {
            path = keep
        } else {
            guard let dir = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
                throw CLIError("cannot create a temporary directory")
            }
            path = String(cString: dir)
        }
        defer { if keep == nil { removeDirectoryTree(path) } }

        var workloadOptions = TeamWorkload.Options()
        workloadOptions.seed = seed
        var workload = TeamWorkload(options: workloadOptions)
        let genStart = monotonicSeconds()
        var lines: [[UInt8]] = []
        lines.reserveCapacity(ops)
        for _ in 0..<ops { lines.append(Array(workload.next().utf8)) }
        let genSeconds = monotonicSeconds() - genStart

        var storeOptions = Store.Options()
        storeOptions.requestedConfig = settings.request
        let store: Store
        do { store = try Store(path: path, options: storeOptions) } catch { throw cannotOpen(path, error) }
        var options = Processor.Options()
        options.emit = .none
        let processor = Processor(store: store, options: options) { _ in }
        let start = monotonicSeconds()
        for (i, line) in lines.enumerated() {
            try processor.process(.text(number: i + 1, bytes: line))
        }
        try processor.commit()
        let seconds = max(monotonicSeconds() - start, 1e-9)
        let s = processor.summary

        let world = store.world
        let live = world.teams.values.filter { !$0.dismissed }
        let biggest = live.max { ($0.memberCount, $1.id) < ($1.memberCount, $0.id) }
        let auditStart = monotonicSeconds()
        let audit = try store.audit()
        let auditSeconds = max(monotonicSeconds() - auditStart, 1e-9)

        try printOut(
            """
            teamlog demo — seed \(seed), \(ops) generated ops (\(format3(genSeconds)) s to generate)
            store        \(keep ?? "\(path) (temporary)")
            ingested     \(s.accepted) accepted, \(s.rejected) rejected, \(s.duplicates) duplicates in \(format3(seconds)) s
            rate         \(Int(Double(s.lines) / seconds)) ops/s (durable commits every \(options.batchSize) ops: \(s.commits))
            teams        \(world.teams.count) created, \(live.count) live, \(world.teams.count - live.count) dismissed
            members      \(live.reduce(0) { $0 + $1.memberCount }) in live teams; largest \(biggest.map { "\($0.id) with \($0.memberCount)" } ?? "-")
            audit        \(audit.ok ? "OK" : "FAILED") — \(audit.events) events replayed in \(format3(auditSeconds)) s
            """)
        if let biggest, var view = try store.teamView(biggest.id) {
            if case .object(var pairs) = view, let i = pairs.firstIndex(where: { $0.0 == "members" }),
                case .array(let members) = pairs[i].1, members.count > 8
            {
                pairs[i].1 = .array(Array(members.prefix(8)))
                view = .object(pairs)
                try printOut("\nsample team (first 8 of \(members.count) members):")
            } else {
                try printOut("\nsample team:")
            }
            try printOut(TeamTable.render(view))
        }
        if !audit.ok { throw ExitCode(1) }
    }
}
