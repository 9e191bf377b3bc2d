module github.com/rxc-project/rxc/proto

go 1.26.8
