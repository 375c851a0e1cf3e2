import pandas as pd

# A German export: semicolons between fields, decimal commas, dates as DD.MM.YYYY.
rain = pd.read_csv("/work/rainfall_de.csv", sep=";", decimal=",")
rain["Datum"] = pd.to_datetime(rain["Datum"], format="%d.%m.%Y")
july = rain[(rain["Station"] == "Kassel") & (rain["Datum"].dt.month == 7)]
print(f"Kassel had {july['Niederschlag_mm'].sum():.1f} mm of rain in July 2023.")
print(f"ANSWER: {july['Niederschlag_mm'].sum():.1f} mm")
