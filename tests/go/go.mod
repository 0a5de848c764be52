module rewind.test/go

go 1.19
