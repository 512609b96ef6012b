.["@timestamp"] = .eventTime
| .event = {kind: "event", action: .eventName, type: (if .readOnly then ["access"] else ["change"] end), outcome: (if .errorCode then "failure" else "success" end)}
| .source = {address: .sourceIPAddress}
| .cloud = {region: .awsRegion, account: {id: .recipientAccountId}}
| del(.tlsDetails)
