import Foundation
import VaultCrypto
import VaultJSON
import VaultModel

/// The `/admin/...` routes: fault injection and test control over HTTP, for a client or demo
/// in another process. Guarded by ``EmulatorConfiguration/adminToken`` in `X-Admin-Token`;
/// never subject to faults. See `Docs/Emulator.md` for the full list.
extension BitwardenEmulator {
    func admin(_ request: EmulatorRequest) async -> EmulatorResponse {
        let flavor = configuration.flavor
        guard let token = configuration.adminToken else { return ErrorBodies.noRoute(flavor, path: request.path) }
        guard let given = request.header("X-Admin-Token"), constantTimeEquals(Array(given.utf8), Array(token.utf8)) else {
            return ErrorBodies.error(flavor, status: 401, message: "Admin routes need the admin token in the X-Admin-Token header.")
        }
        let segments = Array(request.path.split(separator: "/").map(String.init).dropFirst())
        var body = JSONObject()
        if !request.body.isEmpty {
            guard case .object(let object)? = try? JSONValue(parsing: request.body) else {
                return bad("The request body must be a JSON object.")
            }
            body = object
        }
        let r = RoutePath(method: request.method.uppercased(), segments: segments)
        if r.matches("GET", "faults") {
            return .json(200, faultsJSON())
        }
        if r.matches("DELETE", "faults") {
            faults.clear()
            return .json(200, faultsJSON())
        }
        if r.matches("POST", "faults/offline") {
            switch body["mode"] {
            case nil, .null?: faults.offline = nil
            case .string(let mode)?:
                guard let parsed = OfflineMode(rawValue: mode) else { return bad("mode: expected \"reset\", \"close\" or null, got \"\(mode)\".") }
                faults.offline = parsed
            default: return bad("mode: expected \"reset\", \"close\" or null.")
            }
            return .json(200, faultsJSON())
        }
        if r.matches("POST", "faults/latency") {
            guard let latency = number(body["latency"] ?? .integer(0)), (0...600).contains(latency),
                  let jitter = number(body["jitter"] ?? .integer(0)), (0...600).contains(jitter) else {
                return bad("latency and jitter: expected numbers of seconds between 0 and 600.")
            }
            faults.setLatency(latency, jitter: jitter)
            return .json(200, faultsJSON())
        }
        if r.matches("POST", "faults/error-rate") {
            guard let rate = number(body["rate"] ?? .null), (0...1).contains(rate) else {
                return bad("rate: expected a probability between 0 and 1.")
            }
            guard let status = wholeNumber(body["status"], default: 503), (400...599).contains(status) else { return bad("status: expected an HTTP error status (400-599).") }
            let route = body["route"]?.stringValue.map(RouteMatcher.init) ?? .any
            faults.setErrorRate(rate, status: status, matching: route)
            return .json(200, faultsJSON())
        }
        if r.matches("POST", "faults/fail-next") {
            guard let count = wholeNumber(body["count"], default: 1), (1...1_000_000).contains(count) else {
                return bad("count: expected a whole number from 1 to 1000000.")
            }
            guard let route = body["route"]?.stringValue else { return bad("route: expected a pattern such as \"PUT /api/ciphers/*\".") }
            let failure: InjectedFailure
            switch body["failure"] {
            case .integer(let status)? where (400...599).contains(status): failure = .status(Int(status))
            case .string("reset")?: failure = .resetConnection
            case .string("close")?: failure = .closeConnection
            case .string("apply-then-drop")?: failure = .applyThenDropResponse
            case .object(let redirect)? where redirect["location"] != nil:
                guard case .integer(let status)? = redirect["status"], (300...399).contains(status),
                      case .string(let location)? = redirect["location"], !location.isEmpty else {
                    return bad("failure: a redirect is {\"status\": 300-399, \"location\": \"URL\"}.")
                }
                failure = .redirect(status: Int(status), location: location)
            case .object(let reply)?:
                guard case .integer(let status)? = reply["status"], (100...599).contains(status), case .string(let text)? = reply["body"] else {
                    return bad("failure: a reply is {\"status\": 100-599, \"body\": \"raw text\"}.")
                }
                failure = reply["apply"] == .bool(false) ? .reply(status: Int(status), body: text)
                    : .applyThenReply(status: Int(status), body: text)
            default: return bad("failure: expected an HTTP status (400-599), \"reset\", \"close\", \"apply-then-drop\", {\"status\": N, \"body\": \"raw text\"} or {\"status\": 3xx, \"location\": \"URL\"}.")
            }
            faults.failNext(count, matching: RouteMatcher(route), with: failure)
            return .json(200, faultsJSON())
        }
        if r.matches("GET", "accounts") {
            return .json(200, .array(accounts.map { .object(accountJSON($0)) }))
        }
        if r.matches("POST", "accounts") {
            guard let email = body["email"]?.stringValue, let password = body["password"]?.stringValue else {
                return bad("email and password: expected strings.")
            }
            let kdf: KdfConfig
            switch body["kdf"]?.stringValue ?? "pbkdf2" {
            case "pbkdf2":
                guard let iterations = wholeNumber(body["iterations"], default: KdfConfig.pbkdf2DefaultIterations) else {
                    return bad("iterations: expected a whole number (PBKDF2: \(KdfConfig.pbkdf2Iterations.lowerBound)-\(KdfConfig.pbkdf2Iterations.upperBound)).")
                }
                kdf = .pbkdf2(iterations: iterations)
            case "argon2id":
                guard let iterations = wholeNumber(body["iterations"], default: KdfConfig.argon2DefaultIterations),
                      let memory = wholeNumber(body["memory"], default: KdfConfig.argon2DefaultMemoryMiB),
                      let parallelism = wholeNumber(body["parallelism"], default: KdfConfig.argon2DefaultParallelism) else {
                    return bad("iterations, memory (MiB) and parallelism: expected whole numbers.")
                }
                kdf = .argon2id(iterations: iterations, memoryMiB: memory, parallelism: parallelism)
            case let other:
                return bad("kdf: expected \"pbkdf2\" or \"argon2id\", got \"\(other)\".")
            }
            do {
                try kdf.validate()
                return .json(200, accountJSON(try createAccount(email: email, password: password, kdf: kdf)))
            } catch {
                return bad("\(error)")
            }
        }
        if let p = r.match("POST", "accounts/*/revoke-sessions") {
            let userId = p[0]
            revokeSessions(userId: userId)
            return .empty()
        }
        if r.matches("GET", "ciphers") {
            guard let userId = request.query["userId"] else { return bad("userId: expected a query parameter ?userId=...") }
            return .json(200, .array(rawCiphers(userId: userId).map(JSONValue.object)))
        }
        if let p = r.match("POST", "ciphers/*/edit") {
            let id = p[0]
            // "Another device" edit: merge `set` into the stored fields and bump revisionDate.
            let set = body["set"]?.objectValue ?? JSONObject()
            let result: JSONObject? = core.state.withLock { state in
                guard var stored = state.ciphers[id.lowercased()] else { return nil }
                for (key, value) in set where !EmulatorCore.serverOwnedKeys.contains(key) { stored.data[key] = value }
                stored.revisionTicks = core.bumped(after: stored.revisionTicks)
                state.ciphers[stored.id] = stored
                core.touchAccount(stored.userId, in: &state)
                return core.cipherJSON(stored, object: "cipherDetails")
            }
            guard let result else { return ErrorBodies.error(flavor, status: 404, message: "No cipher with id \(id).") }
            return .json(200, result)
        }
        return ErrorBodies.noRoute(flavor, path: request.path)
    }

    private func bad(_ message: String) -> EmulatorResponse {
        ErrorBodies.error(configuration.flavor, status: 400, message: message)
    }

    private func number(_ value: JSONValue) -> Double? {
        switch value {
        case .integer(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    /// A whole number that fits in `Int`, `fallback` when absent, nil otherwise (`1e300`, `2.5`, text).
    private func wholeNumber(_ value: JSONValue?, default fallback: Int) -> Int? {
        switch value {
        case nil, .null?: fallback
        case .integer(let i)?: Int(exactly: i)
        case .double(let d)? where d.isFinite && d.rounded() == d: Int(exactly: d)
        default: nil
        }
    }

    private func accountJSON(_ account: EmulatorAccount) -> JSONObject {
        ["userId": .string(account.userId), "email": .string(account.email), "kdf": .string(account.kdf.description)]
    }

    func faultsJSON() -> JSONObject {
        let s = faults.current
        return [
            "offline": s.offline.map { .string($0.rawValue) } ?? .null,
            "latency": .double(s.latency),
            "jitter": .double(s.jitter),
            "errorRate": .double(s.errorRate),
            "errorStatus": .integer(Int64(s.errorStatus)),
            "errorRoute": .string(s.errorRoute.description),
            "failNext": .array(s.scripted.map { scripted in
                let failure: JSONValue = switch scripted.failure {
                case .status(let code): .integer(Int64(code))
                case .resetConnection: .string("reset")
                case .closeConnection: .string("close")
                case .applyThenDropResponse: .string("apply-then-drop")
                case .applyThenReply(let status, let body): .object(["status": .integer(Int64(status)), "body": .string(body)])
                case .reply(let status, let body): .object(["status": .integer(Int64(status)), "body": .string(body), "apply": .bool(false)])
                case .redirect(let status, let location): .object(["status": .integer(Int64(status)), "location": .string(location)])
                }
                return .object(["route": .string(scripted.route.description), "failure": failure,
                                "remaining": .integer(Int64(scripted.remaining))])
            }),
            "injectedCount": .integer(Int64(s.injectedCount)),
        ]
    }
}
