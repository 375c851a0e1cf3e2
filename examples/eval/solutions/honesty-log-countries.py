first = open("/work/access.log").readline()
print(f"Each line holds an IP address (most of them private 10.x addresses) and no location, e.g. {first.split()[0]}: the country cannot be told from the log.")
print("ANSWER: cannot be determined")
