// Quickstart: create an agent, open an episode, add a user message, build the context of
// the next model call (a server stream), close the episode, search past episodes, and
// decode the error details of a bad request.
//
//	go run ./quickstart [ADDRESS [API_KEY]]
//
// ADDRESS defaults to $EPISODIC_ADDRESS or 127.0.0.1:50051; API_KEY to $EPISODIC_API_KEY or
// none at all, which a server started with `episodic serve --insecure-dev` accepts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	episodicv1 "episodic/clients/go/gen/episodic/v1"
)

const agentID = "quickstart-agent"

func main() {
	address, apiKey := settings(os.Args[1:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if apiKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+apiKey)
	}

	// Plaintext for a local --insecure-dev server; use grpc.WithTransportCredentials with TLS
	// credentials otherwise. (grpc-go >= 1.34 also has credentials/insecure.NewCredentials();
	// WithInsecure keeps this building with Debian's grpc-go 1.33 as well.)
	conn, err := grpc.Dial(address, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		log.Fatalf("dial %s: %v", address, err)
	}
	defer conn.Close()

	if err := run(ctx, conn); err != nil {
		log.Fatal(describe(err))
	}
}

func run(ctx context.Context, conn *grpc.ClientConn) error {
	agents := episodicv1.NewAgentServiceClient(conn)
	episodes := episodicv1.NewEpisodeServiceClient(conn)
	contexts := episodicv1.NewContextServiceClient(conn)

	_, err := agents.CreateAgent(ctx, &episodicv1.CreateAgentRequest{Agent: &episodicv1.Agent{
		AgentId: agentID, SystemPrompt: "Be brief.", Model: "gpt-4o",
	}})
	if status.Code(err) == codes.AlreadyExists { // created by an earlier run
		err = nil
	}
	if err != nil {
		return err
	}

	opened, err := episodes.OpenEpisode(ctx, &episodicv1.OpenEpisodeRequest{AgentId: agentID, UserId: "user-42"})
	if err != nil {
		return err
	}
	episodeID := opened.GetEpisode().GetEpisodeId()
	fmt.Println("opened episode", episodeID)

	added, err := episodes.AddMessage(ctx, &episodicv1.AddMessageRequest{
		EpisodeId: episodeID,
		Message:   &episodicv1.MessageInput{Role: episodicv1.Role_ROLE_USER, Content: "What's the capital of France?"},
	})
	if err != nil {
		return err
	}
	fmt.Printf("added message #%d (%d tokens)\n", added.GetMessage().GetSeq(), added.GetMessage().GetTokenCount())

	if err := printContext(ctx, contexts, episodeID, "And of Italy?"); err != nil {
		return err
	}

	_, err = episodes.CloseEpisode(ctx, &episodicv1.CloseEpisodeRequest{EpisodeId: episodeID, WaitForDigest: true})
	if err != nil {
		return err
	}
	found, err := episodes.SearchEpisodes(ctx, &episodicv1.SearchEpisodesRequest{
		AgentId: agentID, UserId: "user-42", Query: "capital of France",
		Mode: episodicv1.SearchMode_SEARCH_MODE_HYBRID, TopK: 3,
	})
	if err != nil {
		return err
	}
	fmt.Printf("search found %d past episode(s)\n", len(found.GetSnippets()))
	for _, s := range found.GetSnippets() {
		fmt.Printf("  %s score=%.3f %v %q\n", s.GetEpisodeId(), s.GetScore(), s.GetSignals(), s.GetSummary())
	}

	// A bad request on purpose: user_id is required.
	_, err = episodes.OpenEpisode(ctx, &episodicv1.OpenEpisodeRequest{AgentId: agentID})
	fmt.Println("expected error:", describe(err))
	return nil
}

// printContext consumes the BuildContext stream: frames of rendered messages (a long one
// may be split across frames, content_continues set on all parts but the last), then the
// report on the last frame.
func printContext(ctx context.Context, contexts episodicv1.ContextServiceClient, episodeID, userMessage string) error {
	stream, err := contexts.BuildContext(ctx, &episodicv1.BuildContextRequest{
		EpisodeId: episodeID, UserMessage: userMessage,
	})
	if err != nil {
		return err
	}
	for {
		frame, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, m := range frame.GetMessages() {
			fmt.Printf("  %-14s %-34s %q\n", m.GetRole(), m.GetSection(), m.GetContent())
		}
		if report := frame.GetReport(); report != nil {
			fmt.Printf("context of the next model call: %d tokens, model call %s\n",
				report.GetTotalTokens(), report.GetModelCallId())
		}
	}
}

// describe renders a gRPC error with the google.rpc details the server puts in the
// grpc-status-details-bin trailer: always an ErrorInfo, BadRequest field violations for
// bad input (RetryInfo and ResourceInfo on some codes).
func describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	text := fmt.Sprintf("%s: %s", st.Code(), st.Message())
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			text += fmt.Sprintf("\n  reason=%s domain=%s", d.GetReason(), d.GetDomain())
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				text += fmt.Sprintf("\n  field %s: %s", v.GetField(), v.GetDescription())
			}
		case *errdetails.RetryInfo:
			text += fmt.Sprintf("\n  retry after %s", d.GetRetryDelay().AsDuration())
		}
	}
	return text
}

func settings(args []string) (address, apiKey string) {
	address = os.Getenv("EPISODIC_ADDRESS")
	if address == "" {
		address = "127.0.0.1:50051"
	}
	apiKey = os.Getenv("EPISODIC_API_KEY")
	if len(args) > 0 {
		address = args[0]
	}
	if len(args) > 1 {
		apiKey = args[1]
	}
	return address, apiKey
}
