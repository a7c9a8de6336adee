import TeamLog
import TeamLogHTTP
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The repository's root, from this file's path.
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/TeamLogHTTPTests/OpenAPITests.swift
    return parts.joined(separator: "/")
}()

func readFile(_ path: String) -> String? {
    guard let f = fopen(path, "r") else { return nil }
    defer { fclose(f) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buffer, 1, buffer.count, f)
        if n == 0 { break }
        bytes += buffer[..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

func writeFile(_ path: String, _ text: String) {
    let f = fopen(path, "w")!
    _ = Array(text.utf8).withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, f) }
    fclose(f)
}

@Suite(.serialized) struct OpenAPITests {
    @Test func theServedDocumentIsTheCommittedOne() async throws {
        let committed = readFile(repositoryRoot + "/docs/openapi.yaml")
        #expect(committed == OpenAPIDocument.yaml + "\n", "run tools/gen-openapi-swift.sh")
        let server = try await LiveServer()
        let served = try await send("GET", server.base + "/openapi.yaml")
        #expect(served.status == 200)
        #expect(served.body == committed)
        try await server.stop()
    }

    /// Every route the server registers is in the document and nothing else is; every response of a
    /// session touching every route (successes and errors) has a documented status, content type and a
    /// body that validates against its schema (Draft 2020-12, with python3's jsonschema:
    /// tools/check-openapi.py).
    @Test func everyRouteAndResponseMatchesTheDocument() async throws {
        var config = ServerConfiguration()
        config.token = "t0ken"
        config.bodyLimit = 64 << 10
        let server = try await LiveServer(configuration: config)
        let auth = [("Authorization", "Bearer t0ken")]
        var samples: [JSONValue] = []
        func record(
            _ route: Route, _ path: String, method: String? = nil, body: String? = nil, headers: [(String, String)] = []
        )
            async throws
        {
            let reply = try await send(method ?? route.method, server.base + path, body: body, headers: headers)
            samples.append(
                .object([
                    ("method", .string(route.method)), ("route", .string(route.path)),
                    ("status", .int(Int64(reply.status))),
                    ("contentType", .string(reply.header("content-type") ?? "")), ("body", .string(reply.body)),
                ]))
        }
        try await record(.ops, "/v1/ops", body: body(exampleLines + ["nope"]), headers: auth)
        try await record(.ops, "/v1/ops?emit=events", body: exampleLines[0], headers: auth)
        try await record(.ops, "/v1/ops", body: exampleLines[0])  // 401
        try await record(.ops, "/v1/ops?emit=x", body: exampleLines[0], headers: auth)  // 400
        try await record(.ops, "/v1/ops", body: String(repeating: "x", count: 70_000), headers: auth)  // 413
        try await record(.team, "/v1/teams/ops")
        try await record(.team, "/v1/teams/ops?at=2")
        try await record(.team, "/v1/teams/nope")
        try await record(.team, "/v1/teams/ops?at=x")
        // A superTeam conversation in the answers (the document once allowed only team and p2p).
        try await record(
            .ops, "/v1/ops",
            body: body([
                op("team.create", "sam", ["team": "big", "kind": "superTeam", "name": "Big", "members": ["dave"]]),
                op(
                    "message.send", "sam",
                    [
                        "to": ["type": "superTeam", "id": "big"] as KeyValuePairs<String, Any>, "messageId": "sm1",
                        "content": ["type": "text", "text": "hi"] as KeyValuePairs<String, Any>,
                    ]),
            ]), headers: auth)
        try await record(.unread, "/v1/users/dave/unread")
        try await record(.message, "/v1/messages/sm1")
        try await record(.unread, "/v1/users/nobody/unread")
        try await record(.receipts, "/v1/messages/m1/receipts")
        try await record(.receipts, "/v1/messages/m2/receipts")
        try await record(.message, "/v1/messages/m1")
        try await record(.message, "/v1/messages/nope")
        try await record(.channel, "/v1/channels/call1")
        try await record(.channel, "/v1/channels/nope")
        try await record(.log, "/v1/log")
        try await record(.log, "/v1/log?from=x")
        try await record(.status, "/v1/status")
        try await record(.healthz, "/healthz")
        try await record(.readyz, "/readyz")
        try await record(.metrics, "/metrics")
        try await record(.openapi, "/openapi.yaml")
        try await record(.records, "/v1/records?from=x")  // 400; a 200 is an endless stream, read below
        let stream = try await readEvents(server.base + "/v1/records?from=1") { $0.count >= 3 }
        #expect(stream.status == 200)
        samples.append(
            .object([
                ("method", .string("GET")), ("route", .string("/v1/records")), ("status", .int(200)),
                ("contentType", .string("text/event-stream")), ("body", .string("")),
                ("lines", .array(stream.events.flatMap(\.data).map { .string($0) })),
            ]))
        try await server.stop()

        let directory = TemporaryDirectory("teamlog-openapi")
        let input = JSONValue.object([
            ("routes", .array(Route.all.map { .array([.string($0.method), .string($0.path)]) })),
            ("responses", .array(samples)),
        ])
        writeFile(directory.child("samples.json"), input.jsonString)
        let result = try ChildProcess.run(
            "/usr/bin/env",
            [
                "python3", repositoryRoot + "/tools/check-openapi.py", repositoryRoot + "/docs/openapi.yaml",
                directory.child("samples.json"),
            ],
            stderr: directory.child("stderr"), timeout: 60)
        #expect(
            result.status == .exited(0),
            "\(result.lines.joined(separator: "\n"))\n\(readFile(directory.child("stderr")) ?? "")")
        #expect(result.lines.last?.hasPrefix("ok") == true)
    }
}
