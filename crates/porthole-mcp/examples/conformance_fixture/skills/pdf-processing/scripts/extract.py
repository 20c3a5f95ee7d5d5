print("extracting")
