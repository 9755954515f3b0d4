package main

import (
	"context"
	"io"
)

func runPlayerThroughput(ctx context.Context, args []string, w io.Writer) error { return nil }
