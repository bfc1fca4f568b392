// Fuzzes the scenario fixture parser as `vaultlog replay FILE.json` reads it: JSON bytes to a
// `Scenario`, or a `ReplayError` naming the problem. A decoded scenario must encode (as
// `demo --record` writes it) and decode back to itself.
import CFuzzerDriver
import Foundation
import Replay

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    let scenario: Scenario
    do {
        scenario = try Scenario.decode(bytes, path: "fuzz.json")
    } catch {
        _ = "\(error)"   // the message a user sees must be printable
        return 0
    }
    guard let encoded = try? scenario.encoded(), let again = try? Scenario.decode(encoded, path: "fuzz.json"), again == scenario else {
        fatalError("a decoded scenario does not encode and decode back to itself")
    }
    return 0
}

exit(vaultlog_fuzz_main(CommandLine.argc, CommandLine.unsafeArgv))
