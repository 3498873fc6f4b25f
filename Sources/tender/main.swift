// The one Tender executable: all logic lives in TenderServer.
import Foundation
import TenderServer

exit(TenderCLI.run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
