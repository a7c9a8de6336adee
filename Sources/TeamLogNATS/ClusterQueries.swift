public import NATS
public import TeamLog
public import TeamLogRuntime

/// Queries across the partitions of a NATS deployment (`teamlog unread USER --nats URL --partitions N`).
///
/// - `unread` asks every partition (a user's conversations are spread over them) and merges: the
///   total is the sum, conversations are listed most recent first by their last message's event time
///   (`QueryKind.mergeUnread`).
/// - `team` and `channel` ask the partition that owns the id (`PartitionKey`).
/// - `message` and `receipts` name only a message id, whose partition is its conversation's: every
///   partition is asked and the one that knows it answers.
///
/// Seqs in the answers (`lastReadSeq`, `lastMessage.seq`, a message's `seq`) are those of the partition
/// that owns the conversation: each partition has its own log.
public struct ClusterQueries {
    public let connection: NATSConnection
    public let partitions: Int
    /// How the deployment maps a team or channel to its partition.
    public let scheme: PartitionScheme
    public let timeoutMs: Int
    /// The partitioning the op stream records (`nil`: there is no op stream on this NATS server — no
    /// deployment yet; `partitions` is then only what the caller asked for).
    public private(set) var recorded: Partitioning?

    public init(connection: NATSConnection, partitions: Int, scheme: PartitionScheme, timeoutMs: Int = 5_000) {
        self.connection = connection
        self.partitions = partitions
        self.scheme = scheme
        self.timeoutMs = timeoutMs
    }

    /// A client for the deployment on `connection`, with the scheme its op stream records (checked
    /// against `partitions`); with no op stream yet, the scheme new deployments get.
    public init(connection: NATSConnection, partitions: Int, timeoutMs: Int = 5_000) throws {
        let js = try connection.jetStream()
        let partitioning = try retrying(3, "reading the deployment's partitioning") { try TeamLogSubjects.partitioning(js) }
        try partitioning?.check(partitions: partitions)
        self.init(
            connection: connection, partitions: partitions, scheme: partitioning?.scheme ?? .current, timeoutMs: timeoutMs)
        recorded = partitioning
    }

    /// The answer, or `nil` when no partition knows the id.
    public func answer(_ kind: QueryKind, _ id: Id) throws -> JSONValue? {
        switch kind {
        case .unread:
            let answers = try (0..<partitions).map { try ask($0, kind, id) }
            return QueryKind.mergeUnread(user: id, answers.compactMap { $0 })
        case .team:
            return try ask(PartitionKey.partition(of: PartitionKey.teamKey(id), count: partitions, scheme: scheme), kind, id)
        case .channel:
            return try ask(PartitionKey.partition(of: PartitionKey.channelKey(id), count: partitions, scheme: scheme), kind, id)
        case .message, .receipts:
            // A tip's id is `tip-<seq>` of its partition's log, so several partitions may each have one by
            // that id (an operator's trial: 138 of a 3-partition run's tips). Every partition is asked, and
            // two answers are an error naming them rather than the first partition's tip, which may be
            // another team's.
            guard Ids.isReservedTipId(id.string) else {
                for p in 0..<partitions {
                    if let answer = try ask(p, kind, id) { return answer }
                }
                return nil
            }
            let found = try (0..<partitions).compactMap { p in try ask(p, kind, id).map { (p, $0) } }
            guard found.count <= 1 else {
                let teams = found.map { p, answer in
                    "partition \(p)" + (answer["to"]?["id"]?.stringValue.map { " (\($0))" } ?? "")
                }
                throw ClusterError(
                    "\(id) names a tip of \(found.count) partitions: \(teams.joined(separator: ", ")); a tip's id is its "
                        + "partition's seq, so ask that partition's store (`teamlog message \(id) --store …`) or use "
                        + "the conversation's own query (`teamlog team`, `teamlog unread`)")
            }
            return found.first?.1
        }
    }

    /// Each partition's `status`, in partition order; the first partition that gives none throws.
    public func statuses() throws -> [JSONValue] {
        try statusesOrFailures().map { try $0.get() }
    }

    /// Each partition's `status`, or why it gave none (a partition down during an outage is what an
    /// operator asks `status` about: the others are still reported).
    public func statusesOrFailures() -> [Result<JSONValue, ClusterError>] {
        (0..<partitions).map { p in
            do { return .success(try request(p, "status", [])) } catch let error as ClusterError {
                return .failure(error)
            } catch {
                return .failure(ClusterError("partition \(p): \(error)"))
            }
        }
    }

    /// Who holds partition `p`'s lease, as the lease bucket says: the holder and how long ago it last
    /// renewed (`nil`: released or never taken) or, when the bucket cannot be read, why. For a partition
    /// that does not answer, this tells a process that died holding it (its lease lapses) from one that
    /// stopped cleanly.
    public func leaseHolder(_ p: Int) -> Result<(holder: PartitionLease.Holder, renewedMsAgo: Int64)?, ClusterError> {
        do {
            let js = try connection.jetStream()
            // Read only: a deployment without the bucket yet (no partition ever started) gets none made.
            guard let kv = try js.existingKeyValue(PartitionLease.bucket),
                let (holder, writtenNs) = try PartitionLease.holding(kv, partition: p)
            else { return .success(nil) }
            return .success((holder, max(0, Processor.wallClock() - writtenNs / 1_000_000)))
        } catch {
            return .failure(ClusterError("the lease bucket \(PartitionLease.bucket): \(error)"))
        }
    }

    /// One partition's answer; `nil` for its not-found error; other errors are thrown.
    private func ask(_ partition: Int, _ kind: QueryKind, _ id: Id) throws -> JSONValue? {
        let reply = try request(partition, kind.rawValue, Array(id.utf8))
        if let error = reply["error"] {
            if error["code"]?.stringValue == kind.missingCode { return nil }
            throw ClusterError(
                "partition \(partition) could not answer \(kind.rawValue) \(id.string): "
                    + "\(error["code"]?.stringValue ?? "?"): \(error["message"]?.stringValue ?? "")")
        }
        return reply
    }

    private func request(_ partition: Int, _ name: String, _ body: [UInt8]) throws -> JSONValue {
        let subject = TeamLogSubjects.query(partition, name)
        let message: NATSMessage
        do { message = try connection.request(subject, body, timeoutMs: timeoutMs) } catch let error as NATSError
            where error.code == .noResponders
        {
            throw ClusterError("nobody answers on \(subject): partition \(partition) is not running (or not connected to NATS)")
        } catch {
            throw ClusterError("no answer on \(subject) within \(timeoutMs) ms (is partition \(partition) running?): \(error)")
        }
        do { return try JSONParser.parse(message.data) } catch {
            throw ClusterError("partition \(partition) answered \(subject) with bad JSON: \(error)")
        }
    }
}
