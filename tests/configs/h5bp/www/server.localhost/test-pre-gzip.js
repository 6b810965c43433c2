pre-gzip test
