// libFuzzer entry points for the pure domain's input paths (tools/fuzz.sh builds this file into the
// TeamLog module with `-sanitize=fuzzer,address`). Every input must end in a value or a typed error —
// never a trap — and what is accepted must survive the round trips the store and `teamlog log` rely on.
//
// FUZZ_TARGET picks the target:
// - `line` (default): an input line, as `ingest` and `POST /v1/ops` read it. A parsed op must come back
//   equal from its export (`Op.jsonLine`, what `teamlog log` writes and `ingest` accepts again) and from
//   the log's codec (`EventCodec`, what the store writes and a replay reads).
// - `json`: a JSON document. A parsed value must come back from `JSONWriter` as it is shown
//   (`JSONValue.repaired`: invalid UTF-8 as U+FFFD, numbers beyond a `Double` as `null`).
// - `event`: bytes as a log record's payload (a damaged store). Decoding ends in an event or a
//   `DecodeError`; a decoded event's encoding is a fixed point (decodes to an event that encodes to the
//   same bytes: damaged content may come back repaired once, then stays).
// - `encode` (seeding `event`'s corpus, not a target): an input line's op, encoded as the log stores
//   it, is written to a file in the directory FUZZ_OUT.

#if canImport(Glibc)
import Glibc
#endif

private enum Target: String {
    case line, json, event, encode
}

private let target: Target = {
    guard let name = getenv("FUZZ_TARGET").map({ String(cString: $0) }) else { return .line }
    guard let target = Target(rawValue: name) else { fatalError("FUZZ_TARGET \(name): not line, json, event or encode") }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    switch target {
    case .line: fuzzLine(bytes)
    case .json: fuzzJSON(bytes)
    case .event: fuzzEvent(bytes)
    case .encode: writeEncoded(bytes)
    }
    return 0
}

private func fuzzLine(_ bytes: UnsafeRawBufferPointer) {
    guard case .success(let op) = OpParser.parseLine(bytes).result else { return }
    if case .membersSync = op.body {
        fatalError("an input line parsed as the system's members sync")
    }
    guard case .success(let again) = OpParser.parse(line: op.jsonLine) else {
        fatalError("the export of an accepted op is rejected: \(op.jsonLine)")
    }
    if again != op { fatalError("export round trip changed the op:\n\(op)\n\(again)") }
    // An accepted op carries its event time (`decide` resolves it; the log stores it once).
    var accepted = op
    accepted.ts = op.ts ?? 1_700_000_000_000
    let event = Event(seq: 7, ts: accepted.ts!, op: accepted)
    let encoded = EventCodec.encode(event)
    do {
        let decoded = try EventCodec.decode(seq: 7, encoded)
        if decoded != event { fatalError("codec round trip changed the event:\n\(event)\n\(decoded)") }
    } catch {
        fatalError("the log's encoding of an accepted op does not decode: \(error)")
    }
}

private func fuzzJSON(_ bytes: UnsafeRawBufferPointer) {
    guard let value = try? JSONParser.parse(bytes) else { return }
    var writer = JSONWriter()
    writer.write(value)
    do {
        let again = try JSONParser.parse(writer.bytes)
        if again != value.repaired { fatalError("JSON round trip changed the value: \(value) \(again)") }
    } catch {
        fatalError("JSONWriter's output does not parse: \(error)")
    }
}

private func fuzzEvent(_ bytes: UnsafeRawBufferPointer) {
    guard let event = try? EventCodec.decode(seq: 3, bytes) else { return }
    let encoded = EventCodec.encode(event)
    guard let again = try? EventCodec.decode(seq: 3, encoded) else {
        fatalError("a decoded event's encoding does not decode: \(event)")
    }
    let encodedAgain = EventCodec.encode(again)
    guard encodedAgain == encoded, (try? EventCodec.decode(seq: 3, encodedAgain)) == again else {
        fatalError("re-encoding is not a fixed point: \(event) \(again)")
    }
}

nonisolated(unsafe) private var encodedCount = 0

private func writeEncoded(_ bytes: UnsafeRawBufferPointer) {
    guard case .success(let op) = OpParser.parseLine(bytes).result, let out = getenv("FUZZ_OUT") else { return }
    encodedCount += 1
    let path = String(cString: out) + "/encoded-\(getpid())-\(encodedCount)"
    var accepted = op
    accepted.ts = op.ts ?? 1_700_000_000_000
    let encoded = EventCodec.encode(Event(seq: 3, ts: accepted.ts!, op: accepted))
    guard let file = fopen(path, "wb") else { fatalError("cannot write \(path)") }
    _ = encoded.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
    fclose(file)
}
