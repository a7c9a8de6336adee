// What `--scale` reads back from the `teamlog` CLI's own output.

/// The summary `teamlog ingest` prints on stderr:
/// `accepted 4, rejected 1, duplicates 0, 5321 ops/s (5 lines in 0.001 s, 1 commits)`.
struct IngestSummary {
    var accepted: Int
    var rejected: Int
    var duplicates: Int
    var lines: Int
    /// teamlog's own timing: from after the store is open to the end of the last commit.
    var seconds: Double

    /// The summary in `text` (the whole stderr), or nil when it is not there.
    init?(parsing text: String) {
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("accepted ") }).map(String.init),
            let accepted = number(after: "accepted ", in: line),
            let rejected = number(after: "rejected ", in: line),
            let duplicates = number(after: "duplicates ", in: line),
            let lines = number(after: "(", in: line),
            let seconds = number(after: "lines in ", in: line)
        else { return nil }
        self.accepted = Int(accepted)
        self.rejected = Int(rejected)
        self.duplicates = Int(duplicates)
        self.lines = Int(lines)
        self.seconds = seconds
    }
}

/// The first line `teamlog audit` prints: `log: 1000 events replayed to checkpoint seq 1000, 70951 events/s`, and its
/// verdict.
struct AuditSummary {
    var events: Int
    var checkpointSeq: Int
    /// teamlog's own rate: from after the store is open to the end of the comparison.
    var eventsPerSecond: Double
    var ok: Bool

    /// The summary in `text` (the whole stdout), or nil when it is not there.
    init?(parsing text: String) {
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("log: ") }).map(String.init),
            let events = number(after: "log: ", in: line),
            let seq = number(after: "checkpoint seq ", in: line),
            let rate = number(after: " ", in: String(line.split(separator: ",").last ?? ""))
        else { return nil }
        self.events = Int(events)
        checkpointSeq = Int(seq)
        eventsPerSecond = rate
        ok = text.contains("audit OK")
    }
}

/// The decimal number right after the first `marker` in `text`.
private func number(after marker: String, in text: String) -> Double? {
    guard let range = text.firstRange(of: marker) else { return nil }
    let digits = text[range.upperBound...].prefix { $0.isNumber || $0 == "." }
    return Double(digits)
}
