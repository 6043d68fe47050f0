// placeholder: replaced by the web client work
