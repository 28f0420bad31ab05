"""The context inspector: a read-only web page, served beside gRPC on --inspector-address,
that puts an episode's log and what each model call actually rendered side by side."""
