// Command seckill-sink consumes orders from Kafka and persists them into MySQL under the hard
// stock constraint. See README.md.
package main

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"seckill-proxy/conf"
)

func main() {
	cl, err := conf.ParseCommandLine("seckill-sink", os.Args[1:], os.Environ(), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if cl.Done {
		return
	}
	log, err := cl.Config.Log.NewLogger()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()
	log.Error("seckill-sink does not persist orders yet", zap.Strings("kafka", cl.Config.Kafka.Brokers))
	os.Exit(1)
}
