// teamlog-bench --scale: issue 11's bars ("a store that outgrows memory"), measured on the real CLI.
//
//   swift build -c release --product teamlog-bench   (and --product teamlog, --product teamlog-gen)
//   .build/release/teamlog-bench --scale [--scale-ops N] [--scale-chunk N] [--seed S] [--max-team N]
//                                [--out DIR] [--keep] [--scale-base-audit] [--scale-one-process]
//                                [--scale-audit-cache-mb N]
//
// Generates a chat workload once with teamlog-gen, ingests it chunk by chunk into one store, each chunk a
// separate `teamlog ingest` child process, and after each chunk times opening the store to ingest one op;
// then audits the store. Each child's wall time and peak RSS are its own. Writes DIR/scale.md and a chart,
// DIR/scale.svg. `--scale-base-audit`: also `teamlog backup` before the last chunk and, after the audit,
// `teamlog audit --base` of the final store from that copy, `teamlog audit --verified V` of the copy and then
// of the final store (the daily audit, from the verified copy the first one kept), and `unread --at` halfway
// from the copy to the end, from seq 1 and with `--base` that copy (reported, not bars; off by default, so the
// bars' runs stay as they were: one run with it measured the last chunk at 0.74× the first; the run before
// it, without, 0.84×). `--scale-one-process`: the whole workload again by one child (reported, not a bar).
// `--scale-audit-cache-mb N`: a second audit with `--cache-mb N`, against the first (reported, not a bar).

import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// The `--scale` mode: one store grown chunk by chunk by `teamlog` child processes.
struct ScaleBench {
    /// Sizes, and the workload's shape: issue 11's chat workload (about 3,000 teams of up to 2,000 members,
    /// messages dominant: 90% message traffic, of which 78% sends, 12% reads, 4% receipts, presence and
    /// calls; 3% of sends p2p).
    struct Options {
        var ops = 5_000_000
        var chunk = 1_000_000
        var seed: UInt64 = 42
        var users = 250_000
        var teams = 3_000
        var maxTeam = 2_000
        /// Keep the store (its path is printed); every other temporary file is removed.
        var keep = false
        /// A backup before the last chunk, and an audit of the final store from it (`--scale-base-audit`).
        var baseAudit = false
        /// After the chunks, the whole workload again into a new store by one `teamlog ingest` child
        /// (`--scale-one-process`): a writer that runs through the whole history, as `serve` or a stream
        /// does, where each chunk's process starts with an empty working set. Its peak RSS against the
        /// first chunk's shows a working set that grows with history (the twenty-fourth session found one:
        /// 1.90 GB over 10M ops in one process while each 1M-op chunk's process peaked below 1 GB).
        var oneProcess = false
        /// After the audit, a second one with `--cache-mb N` (`--scale-audit-cache-mb N`): the replay's
        /// budget traded for speed, beside the default's in the same run (reported, not a bar).
        var auditCacheMb: Int?
        var outDir = "."
    }

    let options: Options

    /// Not a bar: `teamlog unread USER --at SEQ` of the final store from seq 1, then from the copy
    /// (`--base`): what a point-in-time question costs from nothing and from the last backup.
    private func measurePointInTime(
        _ teamlog: String, store: String, copy: String, at seq: UInt64, out: String, err: String,
        into results: inout ScaleResults
    ) throws {
        let user = "u123"
        progress("unread \(user) as of seq \(fmt(Double(seq))), from seq 1 and from the copy…")
        let query = ["unread", user, "--json", "--store", store, "--at", String(seq)]
        let full = try ChildProcess.run(teamlog, query, stdout: out, stderr: err)
        let fullAnswer = readText(out)
        let fromCopy = try ChildProcess.run(teamlog, query + ["--base", copy], stdout: out, stderr: err)
        let same = full.succeeded && fromCopy.succeeded && readText(out) == fullAnswer
        results.pointInTime = (user, seq, full, fromCopy, same)
        if !same { results.problems.append("unread --at \(seq): the answers from seq 1 and from the copy differ") }
    }

    /// The integer value of `"key":` in a one-line JSON object (the backup's `--json` report).
    static func jsonInteger(_ key: String, in json: String) -> Int? {
        guard let range = json.range(of: "\"\(key)\":") else { return nil }
        return Int(json[range.upperBound...].prefix { $0.isNumber })
    }

    /// Runs the whole measurement, prints the report and writes it to `outDir/scale.md`.
    func run() throws {
        guard options.ops > 0, options.chunk > 0 else { throw BenchError("--scale-ops and --scale-chunk must be > 0") }
        let teamlog = try ChildProcess.sibling("teamlog")
        let started = now()
        let dir = tempDir("scale")
        let store = dir + "/store"
        let copy = dir + "/copy"  // `teamlog backup` before the last chunk, the base of the last audit
        let scratch = (workload: dir + "/workload.jsonl", chunk: dir + "/chunk.jsonl", probe: dir + "/probe.jsonl")
        let (out, err) = (dir + "/child.out", dir + "/child.err")
        defer {
            for file in [scratch.workload, scratch.chunk, scratch.probe, out, err] { unlink(file) }
            if options.keep {
                print("kept the store: \(store)")
            } else {
                removeDirectoryTree(store)
                removeDirectoryTree(copy)
                removeDirectoryTree(dir)
            }
        }

        let floorAtStart = try ChildProcess.run("/bin/true", [], stdout: "/dev/null", stderr: "/dev/null")
        let (genArguments, generation) = try generateChatWorkload(
            ops: options.ops, seed: options.seed, users: options.users, teams: options.teams,
            maxTeam: options.maxTeam, to: scratch.workload, stderr: err)
        var results = ScaleResults(
            command: CommandLine.arguments.joined(separator: " "), date: utcDate(),
            machine: "\(machineDescription()), load average at the start \(loadAverage())",
            workload: "SWIFT_DETERMINISTIC_HASHING=1 teamlog-gen " + genArguments.joined(separator: " "),
            plannedOps: options.ops, chunkSize: options.chunk, generation: generation)

        var splitter = try ChunkSplitter(path: scratch.workload)
        defer { splitter.close() }
        var done = 0
        while done < options.ops {
            let n = try splitter.copy(lines: min(options.chunk, options.ops - done), to: scratch.chunk)
            if n == 0 { break }
            let ingest = try ChildProcess.run(
                teamlog, ["ingest", scratch.chunk, "--store", store, "--emit", "none"], stdout: out, stderr: err)
            let summary = IngestSummary(parsing: readText(err))
            guard ingest.succeeded, summary != nil else {
                results.problems.append(
                    "ingest of ops \(fmt(Double(done)))–\(fmt(Double(done + n))): \(ingest.ending) after "
                        + "\(fmt(ingest.seconds, 1)) s, peak RSS \(fmt(Double(ingest.peakRSSBytes) / 1e6)) MB; "
                        + "stderr: \(tail(readText(err)))")
                break
            }
            // Open the store and ingest one op: a fresh login, its opId unique in the store; its ts is the
            // workload's start, raised by the processor to the log's last event time, so it moves no clock.
            let k = results.chunks.count + 1
            writeFile(
                scratch.probe,
                "{\"op\":\"client.login\",\"actor\":\"scale-probe-\(k)\",\"device\":\"probe\","
                    + "\"ts\":1767225600000,\"opId\":\"scale-probe-\(k)\"}\n")
            let probe = try ChildProcess.run(
                teamlog, ["ingest", scratch.probe, "--store", store, "--emit", "none"], stdout: out, stderr: err)
            let probeSummary = IngestSummary(parsing: readText(err))
            if !probe.succeeded || probeSummary?.accepted != 1 {
                results.problems.append(
                    "open + 1 op after ops \(fmt(Double(done + n))): \(probe.ending), stderr: \(tail(readText(err)))")
            }
            let chunk = ScaleResults.Chunk(
                firstOp: done, ops: n, ingest: ingest, ingestSummary: summary, probe: probe,
                probeSummary: probeSummary, storeDiskBytes: diskBytes(store))
            results.chunks.append(chunk)
            done += n
            progress(
                "ops \(fmt(Double(chunk.firstOp)))–\(fmt(Double(done))): \(fmt(chunk.wallRate)) ops/s wall "
                    + "(\(chunk.ownRate.map { fmt($0) } ?? "?") by teamlog's clock), peak RSS "
                    + "\(fmt(Double(ingest.peakRSSBytes) / 1e6)) MB; open + 1 op \(fmt(probe.seconds, 2)) s, "
                    + "\(fmt(Double(probe.peakRSSBytes) / 1e6)) MB; store on disk "
                    + "\(fmt(Double(chunk.storeDiskBytes) / 1e6)) MB")
            if options.baseAudit && done < options.ops && done + options.chunk >= options.ops {
                // Before the last chunk: a copy for an audit of the final store from it (what a deployment
                // would run each day instead of replaying its whole history).
                let backup = try ChildProcess.run(
                    teamlog, ["backup", "--store", store, "--to", copy, "--json"], stdout: out, stderr: err)
                results.backup = (backup, done, readText(out).split(separator: "\n").last.map(String.init) ?? "")
                if !backup.succeeded { results.problems.append("backup: \(backup.ending): \(tail(readText(err)))") }
            }
        }
        unlink(scratch.chunk)
        if options.oneProcess && !results.chunks.isEmpty {
            progress("ingesting all \(fmt(Double(done))) ops again in one process…")
            let oneStore = dir + "/one"
            let run = try ChildProcess.run(
                teamlog, ["ingest", scratch.workload, "--store", oneStore, "--emit", "none"], stdout: out, stderr: err)
            results.oneProcess = (run, IngestSummary(parsing: readText(err)))
            if !run.succeeded { results.problems.append("one-process ingest: \(run.ending): \(tail(readText(err)))") }
            removeDirectoryTree(oneStore)
        }
        unlink(scratch.workload)

        if results.chunks.isEmpty {
            results.problems.append("audit: not run, nothing was ingested")
        } else {
            progress("auditing…")
            let audit = try ChildProcess.run(teamlog, ["audit", "--store", store], stdout: out, stderr: err)
            let summary = AuditSummary(parsing: readText(out))
            results.audit = audit
            results.auditSummary = summary
            if summary == nil {
                results.problems.append(
                    "audit: \(audit.ending), no summary line; stdout: \(tail(readText(out))) stderr: "
                        + tail(readText(err)))
            } else if !audit.succeeded {
                results.problems.append("audit: \(audit.ending): \(tail(readText(out)))")
            }
            if let mb = options.auditCacheMb {
                progress("auditing again with --cache-mb \(mb)…")
                let again = try ChildProcess.run(
                    teamlog, ["audit", "--store", store, "--cache-mb", String(mb)], stdout: out, stderr: err)
                let summary = AuditSummary(parsing: readText(out))
                results.budgetAudit = (mb, again, summary)
                if summary?.ok != true {
                    results.problems.append("audit --cache-mb \(mb): \(again.ending): \(tail(readText(out)))")
                }
            }
            // Not a bar: the domain's apply alone on the same log (in memory, one thread), the ceiling of
            // any replay of it, so the audit's rate can be read against what the domain itself allows.
            progress("applying the log to an in-memory World alone (the replay's ceiling)…")
            let bench = try ChildProcess.sibling("teamlog-bench")
            let ceiling = try ChildProcess.run(bench, ["--apply-ceiling", store], stdout: out, stderr: err)
            let line = readText(out).split(separator: "\n").first { $0.hasPrefix("apply-ceiling: ") }
            let fields = line.map { $0.dropFirst("apply-ceiling: ".count).split(separator: " ") } ?? []
            if ceiling.succeeded, fields.count > 2, let events = Int(fields[0]),
                let seconds = Double(fields[2].filter { $0 != "," })
            {
                results.applyCeiling = (ceiling, events, seconds)
            } else {
                let output = tail(readText(out)) + " " + tail(readText(err))
                results.problems.append("apply ceiling: \(ceiling.ending): \(output)")
            }
            if let backup = results.backup, backup.run.succeeded {
                progress("auditing from the copy taken after ops \(fmt(Double(backup.afterOps)))…")
                let run = try ChildProcess.run(
                    teamlog, ["audit", "--store", store, "--base", copy], stdout: out, stderr: err)
                let lines = readText(out).split(separator: "\n").map(String.init)
                results.baseAudit = (run, lines.first { $0.hasPrefix("base: ") } ?? "", lines.last == "audit OK")
                if !run.succeeded { results.problems.append("audit --base: \(run.ending): \(tail(readText(out)))") }
                // The daily audit a deployment runs with `--verified`: the copy audited in full keeps the
                // first verified copy, and the final store's audit starts from it.
                progress("audit --verified of the copy, then of the final store…")
                let verified = dir + "/verified"
                let ofCopy = try ChildProcess.run(
                    teamlog, ["audit", "--store", copy, "--verified", verified], stdout: out, stderr: err)
                if !ofCopy.succeeded {
                    results.problems.append("audit --verified of the copy: \(ofCopy.ending): \(tail(readText(out)))")
                }
                let ofStore = try ChildProcess.run(
                    teamlog, ["audit", "--store", store, "--verified", verified], stdout: out, stderr: err)
                let rolled = readText(out).split(separator: "\n").map(String.init)
                results.verifiedRoll = (
                    ofCopy, ofStore, rolled.first { $0.hasPrefix("base: ") } ?? "",
                    ofCopy.succeeded && rolled.last == "audit OK"
                )
                if !ofStore.succeeded {
                    results.problems.append("audit --verified of the store: \(ofStore.ending): \(tail(readText(out)))")
                }
                removeDirectoryTree(verified)
                if let copySeq = Self.jsonInteger("checkpointSeq", in: backup.report),
                    let storeSeq = results.auditSummary?.checkpointSeq
                {
                    try measurePointInTime(
                        teamlog, store: store, copy: copy, at: UInt64((copySeq + storeSeq) / 2), out: out, err: err,
                        into: &results)
                }
            }
        }

        let floorAtEnd = try ChildProcess.run("/bin/true", [], stdout: "/dev/null", stderr: "/dev/null")
        results.floorRSSBytes = max(floorAtStart.peakRSSBytes, floorAtEnd.peakRSSBytes)
        results.loadAtEnd = loadAverage()
        results.totalSeconds = now() - started
        let md = results.markdown
        print("\n" + md)
        mkdir(options.outDir, 0o755)  // may exist
        writeFile(options.outDir + "/scale.md", md)
        writeFile(options.outDir + "/scale.svg", results.chart)
        print("wrote \(options.outDir)/scale.md and \(options.outDir)/scale.svg")
    }

    // MARK: Helpers

    /// Prints a progress line at once, also when stdout is a file (a full run takes many minutes).
    private func progress(_ line: String) {
        print(line)
        fflush(nil)  // every stream: `stdout` itself is shared mutable state to Swift 6
    }

    /// Bytes allocated on disk to the files under `dir`, its subdirectories included — the store's log and
    /// its projections (`proj/`) — (`st_blocks`, so a sparse map is not counted). Until the twenty-fourth
    /// session it counted `dir`'s own files only: the log without the projections.
    private func diskBytes(_ dir: String) -> Int {
        guard let handle = opendir(dir) else { return 0 }
        defer { closedir(handle) }
        var total = 0
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            var info = stat()
            guard name != "." && name != "..", lstat(dir + "/" + name, &info) == 0 else { continue }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                total += diskBytes(dir + "/" + name)
            } else {
                total += Int(info.st_blocks) * 512
            }
        }
        return total
    }

    /// The whole file, or "" when it cannot be read (child output is small: summaries and errors).

    /// The last 300 characters, on one line, for problem reports.
    private func tail(_ text: String) -> String {
        String(text.suffix(300)).split(separator: "\n").joined(separator: " / ")
    }
}
