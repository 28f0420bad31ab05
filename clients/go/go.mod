// The Go quickstart for Episodic. The generated stubs live in gen/ (written by
// generate.sh, never committed) under this module's path, which is the go_package of
// proto/episodic/v1/*.proto. `go mod tidy` fills in the requirements (grpc, protobuf,
// genproto's errdetails); scripts/verify_go_client.sh builds it offline instead, against
// Debian's Go packages.
module episodic/clients/go

go 1.19
